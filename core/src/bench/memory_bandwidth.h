// Measures the machine's memory read bandwidth the way decode uses memory: several threads streaming
// through a buffer far larger than the caches. `loom bench` divides decode's achieved bytes/s by it.
//
// On a shared (virtual) machine the bandwidth a process gets drifts by tens of percent from one
// second to the next, so the probe keeps its buffer and is re-run next to every timed decode round:
// each round is compared with the bandwidth measured around it, not with one figure from minutes ago.
#pragma once

#include <cstdint>
#include <memory>

namespace loom {

class ReadBandwidthProbe {
 public:
  // Allocates and touches `buffer_bytes` (page faults are paid here, not in measure()).
  ReadBandwidthProbe(int threads, uint64_t buffer_bytes = 512ull << 20);
  ~ReadBandwidthProbe();

  // Bytes/s: the best of `passes` full passes over the buffer.
  double measure(int passes = 3);

  int threads() const { return threads_; }
  uint64_t buffer_bytes() const { return n_words_ * sizeof(uint64_t); }

 private:
  int threads_;
  uint64_t n_words_;
  std::unique_ptr<uint64_t[]> data_;
};

}  // namespace loom
