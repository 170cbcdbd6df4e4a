#include <algorithm>
#include <cmath>
#include <limits>

#include "stages.h"

namespace loom::samplers {

namespace {

// Matches longer than this are not measured further: the penalty has long saturated (base^256), and
// it bounds the cost of a degenerate history ("a a a a ...") to O(window * kMaxMatch).
constexpr uint32_t kMaxMatch = 256;

}  // namespace

void apply_dry(CandidateSet& set, const SamplerExtras& x, const int32_t* history, uint32_t n_history, uint32_t n_vocab,
               Scratch& scratch) {
  if (x.dry_multiplier <= 0.0f || x.dry_penalty_last_n == 0 || n_history < 2) return;
  // Breakers as a mask over the vocabulary (thousands of ids with the default breakers): set here,
  // cleared on the way out, so the match loop tests one byte per token.
  std::vector<uint8_t>& breaker = scratch.breaker_mask;
  if (breaker.size() < n_vocab) breaker.resize(n_vocab, 0);
  for (uint32_t i = 0; i < x.n_dry_breakers; ++i) {
    const int32_t t = x.dry_breaker_tokens[i];
    if (t >= 0 && static_cast<uint32_t>(t) < n_vocab) breaker[t] = 1;
  }
  const auto is_breaker = [&](int32_t t) { return t >= 0 && static_cast<uint32_t>(t) < n_vocab && breaker[t] != 0; };
  struct ClearMask {
    std::vector<uint8_t>& mask;
    const SamplerExtras& x;
    ~ClearMask() {
      for (uint32_t i = 0; i < x.n_dry_breakers; ++i)
        if (x.dry_breaker_tokens[i] >= 0 && static_cast<size_t>(x.dry_breaker_tokens[i]) < mask.size()) mask[x.dry_breaker_tokens[i]] = 0;
    }
  } clear_mask{breaker, x};
  const uint32_t window = x.dry_penalty_last_n < 0 ? n_history : std::min<uint32_t>(n_history, uint32_t(x.dry_penalty_last_n));
  const int32_t* ctx = history + (n_history - window);
  const uint32_t last = window - 1;
  if (is_breaker(ctx[last])) return;
  // For each earlier position j whose token equals the last one, the repeat ending at j and at the
  // end of the history is as long as the two agree going backwards (breakers stop it); the token
  // that followed j would extend the repeat, and takes the longest such length.
  std::vector<int32_t>& longest = scratch.token_counts;  // [n_vocab], all zero between uses
  std::vector<int32_t>& touched = scratch.touched;
  touched.clear();
  for (uint32_t j = 0; j < last; ++j) {
    if (ctx[j] != ctx[last]) continue;
    const int32_t next = ctx[j + 1];
    if (next < 0 || static_cast<uint32_t>(next) >= n_vocab || is_breaker(next)) continue;
    uint32_t length = 0;
    while (length <= j && length < kMaxMatch && ctx[j - length] == ctx[last - length] && !is_breaker(ctx[j - length]))
      ++length;
    if (length == 0) continue;
    if (longest[next] == 0) touched.push_back(next);
    longest[next] = std::max<int32_t>(longest[next], int32_t(length));
  }
  // Each token's penalty, kept in token_bias (zero between uses) so the set is walked once.
  std::vector<float>& penalty = scratch.token_bias;
  bool changed = false;
  for (int32_t token : touched) {
    const int32_t length = longest[token];
    longest[token] = 0;
    if (length < x.dry_allowed_length) continue;
    // Clamped twice so the penalty stays finite however long the repeat and large the multiplier
    // (an infinite one would make the logit -inf and later stages' arithmetic NaN).
    const double exponent = std::min<double>(length - x.dry_allowed_length, std::log(std::numeric_limits<float>::max() / 2) / std::log(x.dry_base));
    penalty[token] = static_cast<float>(std::min<double>(x.dry_multiplier * std::pow(static_cast<double>(x.dry_base), exponent),
                                                         std::numeric_limits<float>::max() / 2));
    changed = true;
  }
  if (changed) {
    if (set.is_identity) {
      for (int32_t token : touched) set.data[token].logit -= penalty[token];
    } else {
      for (uint32_t i = 0; i < set.n; ++i) set.data[i].logit -= penalty[set.data[i].id];
    }
  }
  for (int32_t token : touched) penalty[token] = 0.0f;
  if (changed) set.is_sorted = false;
}

}  // namespace loom::samplers
