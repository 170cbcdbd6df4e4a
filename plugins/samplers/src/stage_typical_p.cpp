#include <cmath>

#include "mass_select.h"
#include "stages.h"

namespace loom::samplers {

void apply_typical_p(CandidateSet& set, float typical_p, Scratch& scratch) {
  if (typical_p >= 1.0f || set.n <= 1) return;
  const float max = set.max_logit();
  const double total = set.sum_exp(max);
  const double log_total = std::log(total);
  // Surprisal of token i: -log p_i = log_total - (logit_i - max). Entropy H = sum p_i * surprisal_i.
  double entropy = 0.0;
  for (uint32_t i = 0; i < set.n; ++i) {
    const double shifted = static_cast<double>(set.data[i].logit - max);
    entropy += std::exp(shifted) / total * (log_total - shifted);
  }
  const auto distance = [&](const Candidate& c) {
    return std::fabs(log_total - static_cast<double>(c.logit - max) - entropy);
  };
  const auto before = [&](const Candidate& a, const Candidate& b) {
    const double da = distance(a);
    const double db = distance(b);
    return da < db || (da == db && a.id < b.id);
  };
  const auto mass = [max](const Candidate& c) { return std::exp(static_cast<double>(c.logit - max)); };
  set.n = smallest_prefix_reaching(set.data, set.n, false, before, mass, static_cast<double>(typical_p) * total, scratch.heap).count;
  set.is_sorted = false;
  set.is_identity = false;
}

}  // namespace loom::samplers
