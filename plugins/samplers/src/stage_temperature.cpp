#include <cmath>

#include "stages.h"

namespace loom::samplers {

void apply_temperature(CandidateSet& set, float temperature) {
  if (set.n == 0) return;
  if (temperature <= 0.0f) {
    // Greedy: the argmax, ties to the lowest token id.
    Candidate best = set.data[0];
    for (uint32_t i = 1; i < set.n; ++i)
      if (ranks_before(set.data[i], best)) best = set.data[i];
    set.data[0] = best;
    set.n = 1;
    set.is_sorted = true;
    set.is_identity = false;
    return;
  }
  if (temperature == 1.0f) return;
  // Shift by the maximum before dividing: softmax is unchanged, and a tiny temperature cannot push
  // the best logit to +inf (only far-behind tokens underflow to -inf, i.e. probability 0).
  const double max = set.max_logit();
  const double inverse = 1.0 / static_cast<double>(temperature);
  for (uint32_t i = 0; i < set.n; ++i)
    set.data[i].logit = static_cast<float>((static_cast<double>(set.data[i].logit) - max) * inverse);
  set.drop_masked();
}

}  // namespace loom::samplers
