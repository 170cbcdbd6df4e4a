// Measures the machine's memory read bandwidth the way decode uses memory: several threads streaming
// through a buffer far larger than the caches. `loom bench` divides decode's achieved bytes/s by it.
#pragma once

#include <cstdint>

namespace loom {

struct BandwidthResult {
  double bytes_per_second = 0;
  uint64_t buffer_bytes = 0;
  int threads = 0;
};

// Best of `repeats` passes over a `buffer_bytes` buffer with `threads` readers.
BandwidthResult measure_read_bandwidth(int threads, uint64_t buffer_bytes = 512ull << 20, int repeats = 5);

}  // namespace loom
