#include <cmath>

#include "stages.h"

namespace loom::samplers {

void apply_top_n_sigma(CandidateSet& set, float n_sigma) {
  if (n_sigma <= 0.0f || set.n <= 1) return;
  // Mean and standard deviation of the finite logits still in the set (Tang et al., "Top-nσ"), in
  // double; an earlier stage may have pushed one to -inf (llama.cpp skips those too).
  double sum = 0.0;
  uint32_t n_finite = 0;
  for (uint32_t i = 0; i < set.n; ++i)
    if (std::isfinite(set.data[i].logit)) sum += set.data[i].logit, ++n_finite;
  if (n_finite <= 1) return;
  const double mean = sum / n_finite;
  double squares = 0.0;
  for (uint32_t i = 0; i < set.n; ++i)
    if (std::isfinite(set.data[i].logit)) squares += (set.data[i].logit - mean) * (set.data[i].logit - mean);
  const double threshold = static_cast<double>(set.max_logit()) - n_sigma * std::sqrt(squares / n_finite);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < set.n; ++i)
    if (static_cast<double>(set.data[i].logit) >= threshold) set.data[kept++] = set.data[i];
  if (kept != set.n) set.is_identity = false;
  set.n = kept;
}

}  // namespace loom::samplers
