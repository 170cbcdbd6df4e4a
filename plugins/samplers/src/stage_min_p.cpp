#include <cmath>

#include "stages.h"

namespace loom::samplers {

void apply_min_p(CandidateSet& set, float min_p) {
  if (min_p <= 0.0f || set.n <= 1) return;
  // p_i >= min_p * p_max  <=>  logit_i - logit_max >= log(min_p); no softmax needed.
  const double max = set.max_logit();
  const double threshold = std::log(static_cast<double>(min_p));
  uint32_t kept = 0;
  for (uint32_t i = 0; i < set.n; ++i)
    if (static_cast<double>(set.data[i].logit) - max >= threshold) set.data[kept++] = set.data[i];
  if (kept != set.n) set.is_identity = false;
  set.n = kept;
}

}  // namespace loom::samplers
