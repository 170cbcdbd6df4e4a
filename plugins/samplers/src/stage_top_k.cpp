#include <algorithm>

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
  if (kept <= set.n / 64) {
    // Small k (the usual 40 of 262k): one pass against a bounded heap whose front is the worst kept,
    // about one comparison per token, instead of nth_element's several swapping passes.
    std::vector<Candidate>& heap = scratch.heap;
    heap.assign(set.data, set.data + kept);
    std::make_heap(heap.begin(), heap.end(), ranks_before);
    for (uint32_t i = kept; i < set.n; ++i) {
      if (!ranks_before(set.data[i], heap.front())) continue;
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      heap.back() = set.data[i];
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    }
    std::sort_heap(heap.begin(), heap.end(), ranks_before);
    std::copy(heap.begin(), heap.end(), set.data);
  } else {
    // O(n) selection, then a sort of only the k survivors so later stages (top-p) can walk them.
    std::nth_element(set.data, set.data + kept, set.data + set.n, ranks_before);
    std::sort(set.data, set.data + kept, ranks_before);
  }
  set.n = kept;
  set.is_sorted = true;
  set.is_identity = false;
}

}  // namespace loom::samplers
