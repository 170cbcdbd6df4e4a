#include "ngram_lookup.h"

#include <algorithm>

namespace loom::drafters {

uint32_t ngram_propose(const int32_t* tokens, uint32_t n_tokens, uint32_t n_vocab, const NgramOptions& options,
                       uint32_t max_draft, int32_t* out) {
  if (max_draft == 0 || n_tokens < 2) return 0;
  const uint32_t longest = std::min(options.ngram_max, n_tokens - 1);
  for (uint32_t n = longest; n >= std::max(options.ngram_min, 1u); --n) {
    const int32_t* suffix = tokens + (n_tokens - n);
    // Most recent first: text that was just repeated is the likeliest to be repeated again. The
    // match must leave at least one token after it, so it starts at most at n_tokens - n - 1.
    for (int64_t start = static_cast<int64_t>(n_tokens) - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, tokens + start)) continue;
      const auto from = static_cast<uint32_t>(start) + n;
      uint32_t n_out = 0;
      while (n_out < max_draft && from + n_out < n_tokens) {
        const int32_t token = tokens[from + n_out];
        if (token < 0 || static_cast<uint32_t>(token) >= n_vocab) break;
        out[n_out++] = token;
      }
      if (n_out > 0) return n_out;
    }
    if (n == 1) break;
  }
  return 0;
}

}  // namespace loom::drafters
