// Helpers the AVX2 kernel files share (kernels_avx2.cpp, kernels_avx2_kquants.cpp). Include only
// from files compiled with -mavx2 -mfma -mf16c.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels.h"

namespace loom::cpu::avx2 {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline __m256 sum_i32(__m256i v) { return _mm256_cvtepi32_ps(v); }
// 16 bytes of nibbles → 32 bytes: low nibbles (elements 0..15) then high nibbles (16..31).
inline __m256i unpack_nibbles_32(const uint8_t* q) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), _mm_and_si128(raw, mask));
}
// Byte i of the result is 0x10 where bit i of the 32-bit mask is set: Q5_0's fifth bits, in the
// same element order as unpack_nibbles_32.
inline __m256i high_bits_32(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Broadcast the mask, send byte k/8 of it to lane k, then test bit k%8 of that byte.
  const __m256i shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)), shuffle);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}
inline float block_amax(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// 32 floats * id → 32 int8 (round to nearest even), stored to q; returns the sum of the int8s.
inline int quantize_32(const float* x, float id, int8_t* q) {
  const __m256 mul = _mm256_set1_ps(id);
  __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 0), mul));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), mul));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), mul));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), mul));
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
  // packs interleave 128-bit lanes; the permute restores element order.
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  s = _mm_hadd_epi32(s, s);
  s = _mm_hadd_epi32(s, s);
  return _mm_cvtsi128_si32(s);
}

// A 32-value block's weights as signed bytes, per format (Q4_0's -8 and Q5_0's -16 offsets applied).
struct SignedQ4_0 {
  using Block = loom_block_q4_0;
  static __m256i load(const Block& w) { return _mm256_sub_epi8(unpack_nibbles_32(w.qs), _mm256_set1_epi8(8)); }
};
struct SignedQ5_0 {
  using Block = loom_block_q5_0;
  static __m256i load(const Block& w) {
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles_32(w.qs), high_bits_32(w.qh)), _mm256_set1_epi8(16));
  }
};
struct SignedQ8_0 {
  using Block = loom_block_q8_0;
  static __m256i load(const Block& w) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs)); }
};

// Q6_K: the 6-bit quants (0..63, stored +32) of 128 values from 64 bytes of low nibbles (ql) and 32
// bytes of high bit pairs (qh); q[k] holds values 32k..32k+31.
inline void unpack_q6_k_128(const uint8_t* ql, const uint8_t* qh, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  const __m256i ql_a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
  const __m256i ql_b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
  q[0] = _mm256_or_si256(_mm256_and_si256(ql_a, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql_b, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_a, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_b, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
}

template <typename Act>
inline const Act* act_row(const void* x, size_t stride, int j) {
  return reinterpret_cast<const Act*>(static_cast<const uint8_t*>(x) + size_t(j) * stride);
}

// Dispatches n_x (1..kMaxTile) to the unrolled template instance.
template <void (*F1)(int64_t, const void*, const void*, size_t, float*), void (*F2)(int64_t, const void*, const void*, size_t, float*),
          void (*F3)(int64_t, const void*, const void*, size_t, float*), void (*F4)(int64_t, const void*, const void*, size_t, float*)>
void tile_dispatch(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  switch (n_x) {
    case 1: return F1(n, w, x, xs, out);
    case 2: return F2(n, w, x, xs, out);
    case 3: return F3(n, w, x, xs, out);
    default: return F4(n, w, x, xs, out);
  }
}

// The decode path: the single-row kernel inlined into a loop over rows, prefetching the row
// kPrefetchRows ahead. The hardware prefetcher follows a stream only within a 4 KiB page, and a
// chunk of short rows crosses pages every few rows; asking for the next rows early keeps enough
// cache-line fills in flight to run at memory bandwidth rather than at memory latency.
constexpr int64_t kPrefetchRows = 4;

template <void (*Dot)(int64_t, const void*, const void*, size_t, float*)>
void rows_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < n_rows; r++) {
    if (r + kPrefetchRows < n_rows) {
      const uint8_t* ahead = p + size_t(r + kPrefetchRows) * w_stride;
      for (size_t off = 0; off < w_stride; off += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    }
    Dot(n, p + size_t(r) * w_stride, x, 0, out + r);
  }
}

}  // namespace loom::cpu::avx2

#endif
