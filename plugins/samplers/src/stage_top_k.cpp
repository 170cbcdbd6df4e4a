#include <algorithm>

#include "mass_select.h"
#include "stages.h"

namespace loom::samplers {

void apply_top_k(CandidateSet& set, int32_t k, Scratch& scratch) {
  if (k <= 0 || static_cast<uint32_t>(k) >= set.n) return;  // k beyond the vocabulary keeps everything
  const uint32_t kept = static_cast<uint32_t>(k);
  if (set.is_sorted) {
    set.n = kept;
    set.is_identity = false;
    return;
  }
  select_best(set.data, set.n, kept, RanksBefore{}, scratch.heap);
  set.n = kept;
  set.is_sorted = true;
  set.is_identity = false;
}

}  // namespace loom::samplers
