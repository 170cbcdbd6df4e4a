#include <cmath>

#include "mass_select.h"
#include "stages.h"

namespace loom::samplers {

void apply_top_p(CandidateSet& set, float p, Scratch& scratch) {
  if (p >= 1.0f || set.n <= 1) return;
  const float max = set.max_logit();
  const double total = set.sum_exp(max);
  const auto mass = [max](const Candidate& c) { return std::exp(static_cast<double>(c.logit - max)); };
  const PrefixResult kept =
      smallest_prefix_reaching(set.data, set.n, set.is_sorted, RanksBefore{}, mass, static_cast<double>(p) * total, scratch.heap);
  set.n = kept.count;
  set.is_sorted = kept.is_ordered;
  set.is_identity = false;
}

}  // namespace loom::samplers
