#include <algorithm>
#include <cmath>

#include "stages.h"

namespace loom::samplers {

void apply_xtc(CandidateSet& set, float probability, float threshold, Rng* rng) {
  if (probability <= 0.0f || threshold > 0.5f || set.n < 2) return;
  // The draw decides first (one uniform per step, as llama.cpp), so a step that keeps the set costs
  // no softmax. Without a stream (DISTRIBUTION_ONLY) the stage is applied whenever probability is 1
  // and never otherwise: the host runs XTC requests without speculative decoding.
  const bool fires = rng != nullptr ? rng->uniform() < probability : probability >= 1.0f;
  if (!fires) return;
  if (!set.is_sorted) {
    std::sort(set.data, set.data + set.n, ranks_before);
    set.is_sorted = true;
  }
  const double max = set.data[0].logit;
  const double total = set.sum_exp(static_cast<float>(max));
  // Tokens at or above the threshold form a prefix of the sorted set; all of them but the last
  // (the least likely of the top choices) are excluded, when there are at least two.
  uint32_t above = 0;
  while (above < set.n && std::exp(static_cast<double>(set.data[above].logit) - max) / total >= threshold) ++above;
  if (above < 2) return;
  const uint32_t drop = above - 1;
  std::copy(set.data + drop, set.data + set.n, set.data);
  set.n -= drop;
  set.is_identity = false;
}

}  // namespace loom::samplers
