// Finds the smallest prefix, in a given order, whose probability mass reaches a target, without
// sorting the whole set: select the best `chunk` with nth_element (O(n)), sort only them
// (O(chunk log chunk)), and double the chunk only when the mass is not reached yet. For a peaked
// distribution over 262k tokens that is one O(V) pass plus a sort of 64 entries.
#pragma once

#include <algorithm>
#include <cstdint>

#include "candidates.h"

namespace loom::samplers {

// Reorders data so its first `count` elements are, in `before` order, the smallest prefix whose
// summed `mass` is >= target; returns count (n when rounding leaves the target just out of reach).
template <class Before, class Mass>
uint32_t smallest_prefix_reaching(Candidate* data, uint32_t n, bool is_sorted, Before before, Mass mass,
                                  double target) {
  uint32_t done = 0;
  uint32_t chunk = is_sorted ? n : 64;
  double cumulative = 0.0;
  while (done < n) {
    const uint32_t end = n - done <= chunk ? n : done + chunk;
    if (!is_sorted) {
      // Elements before `done` already rank before everything after it, so only the rest is searched.
      if (end < n) std::nth_element(data + done, data + end, data + n, before);
      std::sort(data + done, data + end, before);
    }
    for (uint32_t i = done; i < end; ++i) {
      cumulative += mass(data[i]);
      if (cumulative >= target) return i + 1;
    }
    done = end;
    chunk *= 2;
  }
  return n;
}

}  // namespace loom::samplers
