#include "bench/memory_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace loom {

namespace {

// Sum 64-bit words with four independent accumulators so the loop is bound by loads, not by the
// add chain; the compiler vectorises it at -O3.
uint64_t read_range(const uint64_t* data, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  for (; i < n; ++i) a += data[i];
  return a + b + c + d;
}

}  // namespace

BandwidthResult measure_read_bandwidth(int threads, uint64_t buffer_bytes, int repeats) {
  threads = std::max(1, threads);
  const size_t n_words = buffer_bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> data(new uint64_t[n_words]);
  // Touch every page (and give it non-zero content) so the pass measures DRAM, not page faults.
  for (size_t i = 0; i < n_words; ++i) data[i] = i;

  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<std::thread> workers;
    auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const size_t begin = n_words * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t end = n_words * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        sink += read_range(data.get() + begin, end - begin);
      });
    }
    for (auto& w : workers) w.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(n_words * sizeof(uint64_t)) / seconds);
  }
  if (sink.load() == 42) best += 0;  // keep the reads observable
  return {best, n_words * sizeof(uint64_t), threads};
}

}  // namespace loom
