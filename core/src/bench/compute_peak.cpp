#include "bench/compute_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

// Each kernel runs `iterations` of a block of independent chains and returns the multiply-adds it
// did. The inputs pass through an empty asm statement every iteration, so the compiler can neither
// hoist nor merge the chains; the result feeds `sink` so they are not dropped either.
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t int8_avx2(uint64_t iterations, int seed, std::atomic<int>& sink) {
  __m256i a0 = _mm256_set1_epi8(char(seed + 1)), a1 = _mm256_set1_epi8(char(seed + 2)), a2 = _mm256_set1_epi8(char(seed + 3)),
          a3 = _mm256_set1_epi8(char(seed + 4)), a4 = _mm256_set1_epi8(char(seed + 5)), a5 = _mm256_set1_epi8(char(seed + 6)),
          a6 = _mm256_set1_epi8(char(seed + 7)), a7 = _mm256_set1_epi8(char(seed + 8));
  const __m256i b = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (uint64_t k = 0; k < iterations; k++) {
#define LOOM_STEP(c, a) c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones))
    LOOM_STEP(c0, a0); LOOM_STEP(c1, a1); LOOM_STEP(c2, a2); LOOM_STEP(c3, a3);
    LOOM_STEP(c4, a4); LOOM_STEP(c5, a5); LOOM_STEP(c6, a6); LOOM_STEP(c7, a7);
#undef LOOM_STEP
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7));
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                                     _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
  sink += _mm256_extract_epi32(s, 0);
  return iterations * 8 * 32;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) uint64_t int8_vnni(uint64_t iterations, int seed, std::atomic<int>& sink) {
  __m512i a0 = _mm512_set1_epi8(char(seed + 1)), a1 = _mm512_set1_epi8(char(seed + 2)), a2 = _mm512_set1_epi8(char(seed + 3)),
          a3 = _mm512_set1_epi8(char(seed + 4)), a4 = _mm512_set1_epi8(char(seed + 5)), a5 = _mm512_set1_epi8(char(seed + 6)),
          a6 = _mm512_set1_epi8(char(seed + 7)), a7 = _mm512_set1_epi8(char(seed + 8));
  const __m512i b = _mm512_set1_epi8(3);
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (uint64_t k = 0; k < iterations; k++) {
    c0 = _mm512_dpbusd_epi32(c0, a0, b); c1 = _mm512_dpbusd_epi32(c1, a1, b);
    c2 = _mm512_dpbusd_epi32(c2, a2, b); c3 = _mm512_dpbusd_epi32(c3, a3, b);
    c4 = _mm512_dpbusd_epi32(c4, a4, b); c5 = _mm512_dpbusd_epi32(c5, a5, b);
    c6 = _mm512_dpbusd_epi32(c6, a6, b); c7 = _mm512_dpbusd_epi32(c7, a7, b);
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));
  }
  const __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                     _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  int total = 0;
  for (int32_t v : lanes) total += v;
  sink += total;
  return iterations * 8 * 64;
}

__attribute__((target("avx2,fma"))) uint64_t f32_fma(uint64_t iterations, int seed, std::atomic<int>& sink) {
  // Ten accumulators cover the FMA latency (4-5 cycles) at two FMAs per cycle.
  __m256 x0 = _mm256_set1_ps(float(seed) * 1e-3f + 0.1f), x1 = _mm256_set1_ps(0.2f), x2 = _mm256_set1_ps(0.3f), x3 = _mm256_set1_ps(0.4f),
         x4 = _mm256_set1_ps(0.5f);
  const __m256 y = _mm256_set1_ps(0.999f);
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0;
  for (uint64_t k = 0; k < iterations; k++) {
    c0 = _mm256_fmadd_ps(x0, y, c0); c1 = _mm256_fmadd_ps(x1, y, c1); c2 = _mm256_fmadd_ps(x2, y, c2);
    c3 = _mm256_fmadd_ps(x3, y, c3); c4 = _mm256_fmadd_ps(x4, y, c4); c5 = _mm256_fmadd_ps(x0, x1, c5);
    c6 = _mm256_fmadd_ps(x1, x2, c6); c7 = _mm256_fmadd_ps(x2, x3, c7); c8 = _mm256_fmadd_ps(x3, x4, c8);
    c9 = _mm256_fmadd_ps(x4, x0, c9);
    __asm__ volatile("" : "+x"(x0), "+x"(x1), "+x"(x2), "+x"(x3), "+x"(x4));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                                 _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)), _mm256_add_ps(c8, c9)));
  sink += int(_mm256_cvtss_f32(s)) & 1;
  return iterations * 10 * 8;
}
#endif

uint64_t int8_scalar(uint64_t iterations, int seed, std::atomic<int>& sink) {
  int32_t c[8] = {};
  int8_t a[8];
  for (int i = 0; i < 8; i++) a[i] = int8_t(seed + i);
  for (uint64_t k = 0; k < iterations; k++) {
    for (int i = 0; i < 8; i++) c[i] += int32_t(a[i]) * 3;
    __asm__ volatile("" : "+m"(a));
  }
  int s = 0;
  for (int v : c) s += v;
  sink += s;
  return iterations * 8;
}

using Kernel = uint64_t (*)(uint64_t, int, std::atomic<int>&);

// Multiply-adds per second of `kernel` on `threads` threads, each running about `seconds`.
double rate(Kernel kernel, int threads, double seconds) {
  std::atomic<int> sink{0};
  // Calibrate the iteration count on one thread, then time all threads together (best of three).
  uint64_t iterations = 1 << 16;
  for (;;) {
    const auto t = Clock::now();
    kernel(iterations, 1, sink);
    const double s = std::chrono::duration<double>(Clock::now() - t).count();
    if (s > seconds / 4 || iterations > (uint64_t(1) << 40)) {
      iterations = uint64_t(double(iterations) * seconds / std::max(s, 1e-6));
      break;
    }
    iterations *= 4;
  }
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    std::atomic<uint64_t> macs{0};
    std::vector<std::thread> pool;
    const auto t = Clock::now();
    for (int i = 0; i < threads; i++) pool.emplace_back([&, i] { macs += kernel(iterations, i, sink); });
    for (auto& th : pool) th.join();
    best = std::max(best, double(macs.load()) / std::chrono::duration<double>(Clock::now() - t).count());
  }
  return best;
}

}  // namespace

ComputePeak measure_compute_peak(int threads, double seconds) {
  ComputePeak peak;
  threads = std::max(threads, 1);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
    peak.int8_instructions = "avx512-vnni vpdpbusd";
    peak.int8_macs_per_s = rate(int8_vnni, threads, seconds);
  } else if (__builtin_cpu_supports("avx2")) {
    peak.int8_instructions = "avx2 vpmaddubsw+vpmaddwd";
    peak.int8_macs_per_s = rate(int8_avx2, threads, seconds);
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) peak.f32_macs_per_s = rate(f32_fma, threads, seconds);
#endif
  if (peak.int8_instructions.empty()) {
    peak.int8_instructions = "scalar";
    peak.int8_macs_per_s = rate(int8_scalar, threads, seconds);
  }
  return peak;
}

}  // namespace loom
