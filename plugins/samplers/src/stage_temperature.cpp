#include <algorithm>
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

int32_t argmax_logits(const float* logits, uint32_t n_vocab) {
  // Eight independent lanes so the compiler keeps the scan in vector registers: one pass for the
  // maximum and the "not below +inf" test (true for NaN and +inf), a second for its first index.
  constexpr uint32_t kLanes = 8;
  float lane_max[kLanes], lane_bad[kLanes];
  for (uint32_t l = 0; l < kLanes; ++l) lane_max[l] = -INFINITY, lane_bad[l] = 0.0f;
  uint32_t i = 0;
  for (; i + kLanes <= n_vocab; i += kLanes) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      const float x = logits[i + l];
      lane_max[l] = x > lane_max[l] ? x : lane_max[l];
      lane_bad[l] = x < INFINITY ? lane_bad[l] : 1.0f;
    }
  }
  float best = -INFINITY;
  bool bad = false;
  for (uint32_t l = 0; l < kLanes; ++l) best = std::max(best, lane_max[l]), bad |= lane_bad[l] != 0.0f;
  for (; i < n_vocab; ++i) best = std::max(best, logits[i]), bad |= !(logits[i] < INFINITY);
  if (bad || best == -INFINITY) return -1;
  for (uint32_t j = 0; j < n_vocab; ++j)
    if (logits[j] == best) return static_cast<int32_t>(j);
  return -1;
}

}  // namespace loom::samplers
