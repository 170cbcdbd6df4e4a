// AVX-512 (F/BW/VL/VNNI) decode kernels. Decode at batch 1 is meant to be memory-bound, but on two
// cores the AVX2 Q5_0 kernel tops out near 12 GB/s with its weights in cache, no faster than DRAM
// delivers them, so its DRAM stalls are never hidden. Here each step takes two blocks in one 512-bit
// register and vpdpbusd multiplies and sums the bytes in one instruction, about half the instructions
// per weight byte. Only the decode path (one activation row) is overridden; everything else is the
// AVX2 table. This file alone is compiled with -mavx512*; FastOps checks the CPU before using it.
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__F16C__)

// GCC 12's AVX-512 intrinsics fill "don't care" operands from _mm512_undefined_*(), which its own
// -Wmaybe-uninitialized then reports inside the headers; nothing here reads an undefined lane.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "cpu_tensor.h"

namespace loom::cpu {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// Two 32-byte activation blocks side by side.
inline __m512i load_act_pair(const BlockQ8& a, const BlockQ8& b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), 1);
}

// Lanes 0-7 scaled by `first`, lanes 8-15 by `second` (the int32 sums of block b and b + 1).
inline __m512 pair_scale(float first, float second) {
  return _mm512_mask_blend_ps(__mmask16(0xFF00), _mm512_set1_ps(first), _mm512_set1_ps(second));
}

// sum(q * y) for unsigned weights q and signed activations y, minus offset * sum(y): exact in int32.
// vpdpbusd needs an unsigned first operand, so the offset goes in as offset x (-y); y is never -128
// (activations are quantized to [-127, 127]), so -y fits.
inline __m512i dot_offset(__m512i q, __m512i y, __m512i offset) {
  const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, y);
  return _mm512_dpbusd_epi32(s, offset, _mm512_sub_epi8(_mm512_setzero_si512(), y));
}

float dot_q5_0_row(int64_t n, const void* w, const BlockQ8* y) {
  const auto* wb = static_cast<const loom_block_q5_0*>(w);
  const int64_t nb = n / 32;
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m512i bit4 = _mm512_set1_epi8(0x10), sixteen = _mm512_set1_epi8(16);
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const loom_block_q5_0 &w0 = wb[b], &w1 = wb[b + 1];
    // Low nibbles are elements 0-15 of a block, high nibbles 16-31. Build [w0 lo, w0 hi, w1 lo, w1 hi].
    const __m256i raw = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(w1.qs), reinterpret_cast<const __m128i*>(w0.qs));
    const __m256i lo = _mm256_and_si256(raw, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // [w0 lo, w1 lo, w0 hi, w1 hi]
    q = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(3, 1, 2, 0));
    // Fifth bits: bit j of qh is element j, so the two masks side by side match q's byte order.
    uint32_t h0, h1;
    std::memcpy(&h0, w0.qh, 4);
    std::memcpy(&h1, w1.qh, 4);
    q = _mm512_mask_add_epi8(q, _cvtu64_mask64(uint64_t(h0) | (uint64_t(h1) << 32)), q, bit4);  // 0..31
    const __m512i sums = dot_offset(q, load_act_pair(y[b], y[b + 1]), sixteen);  // sum((q - 16) * y)
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), pair_scale(h2f(w0.d) * y[b].d, h2f(w1.d) * y[b + 1].d), acc);
  }
  float total = _mm512_reduce_add_ps(acc);
  for (; b < nb; b++) {  // an odd last block
    int isum = 0;
    for (int i = 0; i < 16; i++) {
      const int lo = (wb[b].qs[i] & 0xF) | (((wb[b].qh[i / 8] >> (i % 8)) & 1) << 4);
      const int hi = (wb[b].qs[i] >> 4) | (((wb[b].qh[(i + 16) / 8] >> ((i + 16) % 8)) & 1) << 4);
      isum += (lo - 16) * y[b].qs[i] + (hi - 16) * y[b].qs[i + 16];
    }
    total += h2f(wb[b].d) * y[b].d * float(isum);
  }
  return total;
}

float dot_q8_0_row(int64_t n, const void* w, const BlockQ8* y) {
  const auto* wb = static_cast<const loom_block_q8_0*>(w);
  const int64_t nb = n / 32;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));  // q + 128 as unsigned bytes
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs))),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b + 1].qs)), 1);
    const __m512i sums = dot_offset(_mm512_xor_si512(q, flip), load_act_pair(y[b], y[b + 1]), flip);  // sum(q * y)
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), pair_scale(h2f(wb[b].d) * y[b].d, h2f(wb[b + 1].d) * y[b + 1].d), acc);
  }
  float total = _mm512_reduce_add_ps(acc);
  for (; b < nb; b++) {
    int isum = 0;
    for (int i = 0; i < 32; i++) isum += wb[b].qs[i] * y[b].qs[i];
    total += h2f(wb[b].d) * y[b].d * float(isum);
  }
  return total;
}

// The decode rows loop, prefetching 4 rows ahead as the AVX2 one does (see kernels_avx2.cpp).
template <float (*Dot)(int64_t, const void*, const BlockQ8*)>
void rows_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out) {
  constexpr int64_t kPrefetchRows = 4;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8*>(x);
  for (int64_t r = 0; r < n_rows; r++) {
    if (r + kPrefetchRows < n_rows) {
      const uint8_t* ahead = p + size_t(r + kPrefetchRows) * w_stride;
      for (size_t off = 0; off < w_stride; off += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    }
    out[r] = Dot(n, p + size_t(r) * w_stride, y);
  }
}

Kernels make_table(const Kernels& avx2) {
  Kernels k = avx2;
  k.name = "avx512";
  k.q5_0.rows = rows_dot<dot_q5_0_row>;
  k.q8_0.rows = rows_dot<dot_q8_0_row>;
  return k;
}

}  // namespace

const Kernels* avx512_kernels() {
  const Kernels* avx2 = avx2_kernels();
  if (avx2 == nullptr) return nullptr;
  static const Kernels table = make_table(*avx2);
  return &table;
}

}  // namespace loom::cpu

#else  // not built for AVX-512

namespace loom::cpu {
const Kernels* avx512_kernels() { return nullptr; }
}  // namespace loom::cpu

#endif
