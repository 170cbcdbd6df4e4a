#include <algorithm>
#include <cmath>
#include <limits>

#include "stages.h"

namespace loom::samplers {

namespace {

// Matches longer than this are not measured further: the penalty has long saturated (base^256), and
// it bounds the cost of a degenerate history ("a a a a ...") to O(window * kMaxMatch).
constexpr uint32_t kMaxMatch = 256;

bool is_breaker(int32_t token, const int32_t* breakers, uint32_t n_breakers) {
  return std::find(breakers, breakers + n_breakers, token) != breakers + n_breakers;
}

}  // namespace

void apply_dry(CandidateSet& set, const SamplerExtras& x, const int32_t* history, uint32_t n_history, uint32_t n_vocab,
               Scratch& scratch) {
  if (x.dry_multiplier <= 0.0f || x.dry_penalty_last_n == 0 || n_history < 2) return;
  const uint32_t window = x.dry_penalty_last_n < 0 ? n_history : std::min<uint32_t>(n_history, uint32_t(x.dry_penalty_last_n));
  const int32_t* ctx = history + (n_history - window);
  const uint32_t last = window - 1;
  if (is_breaker(ctx[last], x.dry_breaker_tokens, x.n_dry_breakers)) return;
  // For each earlier position j whose token equals the last one, the repeat ending at j and at the
  // end of the history is as long as the two agree going backwards (breakers stop it); the token
  // that followed j would extend the repeat, and takes the longest such length.
  std::vector<int32_t>& longest = scratch.token_counts;  // [n_vocab], all zero between uses
  std::vector<int32_t>& touched = scratch.touched;
  touched.clear();
  for (uint32_t j = 0; j < last; ++j) {
    if (ctx[j] != ctx[last]) continue;
    const int32_t next = ctx[j + 1];
    if (next < 0 || static_cast<uint32_t>(next) >= n_vocab || is_breaker(next, x.dry_breaker_tokens, x.n_dry_breakers)) continue;
    uint32_t length = 0;
    while (length <= j && length < kMaxMatch && ctx[j - length] == ctx[last - length] &&
           !is_breaker(ctx[j - length], x.dry_breaker_tokens, x.n_dry_breakers))
      ++length;
    if (length == 0) continue;
    if (longest[next] == 0) touched.push_back(next);
    longest[next] = std::max<int32_t>(longest[next], int32_t(length));
  }
  bool changed = false;
  for (int32_t token : touched) {
    const int32_t length = longest[token];
    longest[token] = 0;
    if (length < x.dry_allowed_length) continue;
    // Clamped so the penalty stays finite however long the repeat.
    const double exponent = std::min<double>(length - x.dry_allowed_length, std::log(std::numeric_limits<float>::max() / 2) / std::log(x.dry_base));
    const float penalty = static_cast<float>(x.dry_multiplier * std::pow(static_cast<double>(x.dry_base), exponent));
    if (set.is_identity) {
      set.data[token].logit -= penalty;
    } else {
      for (uint32_t i = 0; i < set.n; ++i)
        if (set.data[i].id == token) set.data[i].logit -= penalty;
    }
    changed = true;
  }
  if (changed) set.is_sorted = false;
}

}  // namespace loom::samplers
