#include "bench/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace loom {

namespace {

// Sum 64-bit words with eight independent accumulators so the loop is bound by loads, not by the
// add chain (the compiler vectorises it), and ask for the data ~1 KiB ahead: the hardware
// prefetcher stops at 4 KiB page boundaries, and the decode kernels prefetch the same way, so the
// limit they are held to is the bandwidth a prefetching reader gets.
uint64_t read_range(const uint64_t* data, size_t n) {
  constexpr size_t kAheadWords = 1024 / sizeof(uint64_t);
  uint64_t acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __builtin_prefetch(data + i + kAheadWords);
    for (int k = 0; k < 8; ++k) acc[k] += data[i + static_cast<size_t>(k)];
  }
  for (; i < n; ++i) acc[0] += data[i];
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(int threads, uint64_t buffer_bytes)
    : threads_(std::max(1, threads)),
      n_words_(std::max<uint64_t>(buffer_bytes / sizeof(uint64_t), 1024)),
      data_(new uint64_t[n_words_]) {
  // Touch every page (with non-zero content) so passes measure DRAM, not page faults.
  for (uint64_t i = 0; i < n_words_; ++i) data_[i] = i;
}

ReadBandwidthProbe::~ReadBandwidthProbe() = default;

double ReadBandwidthProbe::measure(int passes) {
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    std::vector<std::thread> workers;
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads_; ++t) {
      workers.emplace_back([&, t] {
        const uint64_t begin = n_words_ * static_cast<uint64_t>(t) / static_cast<uint64_t>(threads_);
        const uint64_t end = n_words_ * static_cast<uint64_t>(t + 1) / static_cast<uint64_t>(threads_);
        sink += read_range(data_.get() + begin, end - begin);
      });
    }
    for (auto& w : workers) w.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(buffer_bytes()) / seconds);
  }
  if (sink.load() == 42) best += 0;  // keep the reads observable
  return best;
}

}  // namespace loom
