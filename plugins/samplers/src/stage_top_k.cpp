#include <algorithm>

#include "stages.h"

namespace loom::samplers {

void apply_top_k(CandidateSet& set, int32_t k) {
  if (k <= 0 || static_cast<uint32_t>(k) >= set.n) return;  // k beyond the vocabulary keeps everything
  const uint32_t kept = static_cast<uint32_t>(k);
  if (!set.is_sorted) {
    // O(n) selection, then a sort of only the k survivors so later stages (top-p) can walk them.
    std::nth_element(set.data, set.data + kept, set.data + set.n, ranks_before);
    std::sort(set.data, set.data + kept, ranks_before);
  }
  set.n = kept;
  set.is_sorted = true;
  set.is_identity = false;
}

}  // namespace loom::samplers
