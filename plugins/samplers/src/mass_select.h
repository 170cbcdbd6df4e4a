// Finds the smallest set of best-ranked candidates whose probability mass reaches a target without
// sorting the whole set (a full sort of 262k entries costs ~20 ms):
//  1. the common, peaked case: nth_element the best 64 (O(n)), sort only them, walk the cumulative
//     mass; done when the target is reached inside them.
//  2. otherwise a weighted quickselect on the rest: split the undecided range at its middle with
//     nth_element, and keep the half that holds the boundary. n + n/2 + n/4 ... = O(n) expected,
//     and only the final small range is sorted. The kept set is then unordered.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "candidates.h"

namespace loom::samplers {

// Moves the k best (by `before`) of data[0, n) to data[0, k) in `before` order. For k << n a bounded
// heap whose front is the worst kept costs about one comparison per element, several times cheaper
// than nth_element's swapping passes; otherwise nth_element + sort of the k.
template <class Before>
void select_best(Candidate* data, uint32_t n, uint32_t k, Before before, std::vector<Candidate>& heap) {
  if (k >= n) {
    std::sort(data, data + n, before);
    return;
  }
  if (k > n / 64) {
    std::nth_element(data, data + k, data + n, before);
    std::sort(data, data + k, before);
    return;
  }
  heap.assign(data, data + k);
  std::make_heap(heap.begin(), heap.end(), before);
  for (uint32_t i = k; i < n; ++i) {
    if (!before(data[i], heap.front())) continue;
    // The evicted element must stay in data (a later stage or the quickselect may still need it).
    const Candidate evicted = heap.front();
    std::pop_heap(heap.begin(), heap.end(), before);
    heap.back() = data[i];
    std::push_heap(heap.begin(), heap.end(), before);
    data[i] = evicted;
  }
  std::sort_heap(heap.begin(), heap.end(), before);
  // data[0, k) held the heap's seed; whatever of it was evicted now sits in data[k, n).
  std::copy(heap.begin(), heap.end(), data);
}

struct PrefixResult {
  uint32_t count;    // data[0, count) is the kept set
  bool is_ordered;   // data[0, count) is in `before` order
};

// Reorders data so that data[0, count) is the smallest set, by `before` rank, whose summed `mass`
// is >= target (count = n when rounding leaves the target just out of reach).
template <class Before, class Mass>
PrefixResult smallest_prefix_reaching(Candidate* data, uint32_t n, bool is_sorted, Before before, Mass mass,
                                      double target, std::vector<Candidate>& heap) {
  constexpr uint32_t k_head = 64;    // case 1 size
  constexpr uint32_t k_leaf = 256;   // below this a sort beats another split
  double cumulative = 0.0;
  const auto walk = [&](uint32_t begin, uint32_t end) -> uint32_t {
    for (uint32_t i = begin; i < end; ++i) {
      cumulative += mass(data[i]);
      if (cumulative >= target) return i + 1;
    }
    return 0;  // not reached
  };
  if (is_sorted) {
    const uint32_t count = walk(0, n);
    return {count == 0 ? n : count, true};
  }
  const uint32_t head = std::min(n, k_head);
  select_best(data, n, head, before, heap);
  if (const uint32_t count = walk(0, head); count != 0) return {count, true};

  // Invariant: data[0, lo) all rank before data[lo, hi), which rank before data[hi, n);
  // cumulative = mass of data[0, lo) < target; the boundary lies in (lo, hi].
  uint32_t lo = head;
  uint32_t hi = n;
  while (hi - lo > k_leaf) {
    const uint32_t mid = lo + (hi - lo) / 2;
    std::nth_element(data + lo, data + mid, data + hi, before);
    double half = 0.0;
    for (uint32_t i = lo; i < mid; ++i) half += mass(data[i]);
    if (cumulative + half >= target) {
      hi = mid;
    } else {
      cumulative += half;
      lo = mid;
    }
  }
  std::sort(data + lo, data + hi, before);
  const uint32_t count = walk(lo, hi);
  return {count == 0 ? hi : count, false};
}

}  // namespace loom::samplers
