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

#include "candidates.h"

namespace loom::samplers {

struct PrefixResult {
  uint32_t count;    // data[0, count) is the kept set
  bool is_ordered;   // data[0, count) is in `before` order
};

// Reorders data so that data[0, count) is the smallest set, by `before` rank, whose summed `mass`
// is >= target (count = n when rounding leaves the target just out of reach).
template <class Before, class Mass>
PrefixResult smallest_prefix_reaching(Candidate* data, uint32_t n, bool is_sorted, Before before, Mass mass,
                                      double target) {
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
  if (head < n) std::nth_element(data, data + head, data + n, before);
  std::sort(data, data + head, before);
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
