#include <cmath>
#include <cstring>

#include "stages.h"

namespace loom::samplers {

Pick pick_token(const CandidateSet& set, Rng* rng, float* out_probs, uint32_t n_vocab) {
  if (set.n == 0) fail_invalid("every token was removed by the chain");
  const float max = set.max_logit();
  const double total = set.sum_exp(max);
  if (out_probs != nullptr) {
    std::memset(out_probs, 0, sizeof(float) * n_vocab);
    for (uint32_t i = 0; i < set.n; ++i)
      out_probs[set.data[i].id] = static_cast<float>(std::exp(static_cast<double>(set.data[i].logit - max)) / total);
  }
  Pick pick;
  if (rng == nullptr) return pick;
  // Inverse CDF over the candidates in their current (deterministic) order.
  const double target = rng->uniform() * total;
  double cumulative = 0.0;
  uint32_t chosen = set.n;
  uint32_t last_positive = 0;  // rounding can leave target just past the last partial sum
  for (uint32_t i = 0; i < set.n; ++i) {
    const double weight = std::exp(static_cast<double>(set.data[i].logit - max));
    if (weight <= 0.0) continue;
    last_positive = i;
    cumulative += weight;
    if (target < cumulative) {
      chosen = i;
      break;
    }
  }
  if (chosen == set.n) chosen = last_positive;
  pick.token = set.data[chosen].id;
  pick.logprob = static_cast<float>(static_cast<double>(set.data[chosen].logit - max) - std::log(total));
  return pick;
}

}  // namespace loom::samplers
