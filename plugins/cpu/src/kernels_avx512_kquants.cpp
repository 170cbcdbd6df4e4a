// AVX-512 BW kernels for Q4_K and Q6_K: many weight rows x one BlockQ8K activation row (decode), and
// one weight row x a tile of up to kMaxTile activation rows (prefill, batches).
//
// The AVX2 kernels spend more instructions per 256-value block on scalar work (unpacking the 6-bit
// scales and mins one at a time, the min and offset corrections in scalar loops) than on the dot
// product itself, so even with their weights in cache they ran at 3.5-4.6 GB/s per core, well under
// what memory delivers. Here a block's scales are unpacked with a few 32-bit word operations, each
// correction is one vector multiply-add, and each 512-bit step multiplies 64 weights, with the
// sub-block scales applied by vpmaddwd from one permuted register. The integer sums are exact; only
// the float accumulation order differs from the AVX2 kernels. This file alone is compiled with
// -mavx512*; FastOps checks the CPU before using it.
#include "kernels_avx512_kquants.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)

// See kernels_avx512.cpp: GCC 12 warns inside its own AVX-512 headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

namespace loom::cpu {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline float hsum(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}
inline float hsum(__m256 v) { return hsum(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }

// The vpermw indexes of a block's four 64-weight steps: in step s, int16 lane i takes scale
// s x scales_per_step + i / lanes_per_scale.
struct StepScaleIndexes {
  __m512i step[4];
  StepScaleIndexes(int scales_per_step, int lanes_per_scale) {
    alignas(64) int16_t index[32];
    for (int s = 0; s < 4; s++) {
      for (int i = 0; i < 32; i++) index[i] = int16_t(s * scales_per_step + i / lanes_per_scale);
      step[s] = _mm512_load_si512(index);
    }
  }
};

// Block b of NX activation rows that start x_stride bytes apart.
template <int NX>
inline void activation_blocks(const uint8_t* x, size_t x_stride, int64_t b, const BlockQ8K* (&out)[NX]) {
  for (int j = 0; j < NX; j++) out[j] = reinterpret_cast<const BlockQ8K*>(x + size_t(j) * x_stride) + b;
}
constexpr __mmask32 kUpperHalf = 0xFFFF0000u;  // the upper 16 of 32 int16 lanes

// Q4_K packs eight 6-bit scales and eight 6-bit mins in 12 bytes: bytes 0-3 hold scales 0-3 in their
// low six bits and the top bits of scales 4-7 in their high two; bytes 4-7 the same for the mins;
// bytes 8-11 the low four bits of scales 4-7 (low nibbles) and of mins 4-7 (high nibbles). Four
// bytes at a time, the eight scales and the eight mins come out as one 64-bit word each.
inline void unpack_q4_k_scales(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  constexpr uint32_t kLow6 = 0x3F3F3F3F, kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;
  uint32_t a, b, c;
  std::memcpy(&a, packed, 4);
  std::memcpy(&b, packed + 4, 4);
  std::memcpy(&c, packed + 8, 4);
  const uint32_t scales_hi = (c & kLow4) | ((a >> 6) & kLow2) << 4;
  const uint32_t mins_hi = ((c >> 4) & kLow4) | ((b >> 6) & kLow2) << 4;
  *scales = (a & kLow6) | uint64_t(scales_hi) << 32;
  *mins = (b & kLow6) | uint64_t(mins_hi) << 32;
}

// Q4_K: sum over sub-blocks s of d * scale_s * (q . y)_s - dmin * min_s * sum(y)_s, times y's scale.
// Step c takes the 32 bytes of sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles), which meet
// the 64 activation values 64c..64c+63 in order.
struct Q4K {
  using Block = loom_block_q4_k;
  struct Indexes : StepScaleIndexes {
    Indexes() : StepScaleIndexes(2, 16) {}  // one sub-block per 32 bytes
  };
  // out[j] = dot(w, activation row j) for NX rows x + j * x_stride: each block's scales and weights
  // are unpacked once for all of them.
  template <int NX>
  static void dot(int64_t nb, const Block* w, const uint8_t* x, size_t x_stride, const Indexes& index, float* out) {
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    __m512 acc[NX];
    __m128 min_acc[NX];
    for (int j = 0; j < NX; j++) acc[j] = _mm512_setzero_ps(), min_acc[j] = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const Block& blk = w[b];
      const BlockQ8K* yb[NX];
      activation_blocks(x, x_stride, b, yb);
      uint64_t scales8, mins8;
      unpack_q4_k_scales(blk.scales, &scales8, &mins8);
      const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(mins8)));
      const float d = h2f(blk.d), dmin = h2f(blk.dmin);
      for (int j = 0; j < NX; j++) {
        // The mins meet the sums of y over each 32-value sub-block: adjacent pairs of the 16-value sums.
        const __m128i sub_block_sums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb[j]->bsums)),
                                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(yb[j]->bsums + 8)));
        min_acc[j] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mins, sub_block_sums)), _mm_set1_ps(dmin * yb[j]->d), min_acc[j]);
      }
      const __m512i scales = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(scales8))));
      __m512i sum[NX];
      for (int j = 0; j < NX; j++) sum[j] = _mm512_setzero_si512();
      for (int c = 0; c < 4; c++) {
        const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c)));
        const __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(raw, kUpperHalf, raw, 4), nibble);
        const __m512i step_scales = _mm512_permutexvar_epi16(index.step[c], scales);
        for (int j = 0; j < NX; j++) {
          const __m512i products = _mm512_maddubs_epi16(q, _mm512_loadu_si512(yb[j]->qs + 64 * c));
          sum[j] = _mm512_add_epi32(sum[j], _mm512_madd_epi16(products, step_scales));
        }
      }
      for (int j = 0; j < NX; j++) acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[j]), _mm512_set1_ps(d * yb[j]->d), acc[j]);
    }
    for (int j = 0; j < NX; j++) out[j] = _mm512_reduce_add_ps(acc[j]) - hsum(min_acc[j]);
  }
};

// Q6_K: six-bit quants stored + 32, in sixteen 16-value groups with int8 scales. Each 128-value half
// has 64 bytes of low nibbles and 32 bytes of two-bit fields: values 0-63 take the low nibbles of
// bytes 0-63, values 64-127 their high nibbles, and value 32k + l takes bits 2k..2k+1 of field byte
// l. Step j of a half covers its values 64j..64j+63.
struct Q6K {
  using Block = loom_block_q6_k;
  struct Indexes : StepScaleIndexes {
    Indexes() : StepScaleIndexes(4, 8) {}  // one group per 16 bytes
  };
  template <int NX>
  static void dot(int64_t nb, const Block* w, const uint8_t* x, size_t x_stride, const Indexes& index, float* out) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    constexpr int kOrAnd = 0xF8;  // ternary logic: a | (b & c)
    __m512 acc[NX];
    __m256 offset_acc[NX];
    for (int j = 0; j < NX; j++) acc[j] = _mm512_setzero_ps(), offset_acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const Block& blk = w[b];
      const BlockQ8K* yb[NX];
      activation_blocks(x, x_stride, b, yb);
      const float d = h2f(blk.d);
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      for (int j = 0; j < NX; j++) {
        // The +32 storage offset: subtract 32 x sum over groups of scale x sum(y in the group).
        const __m256i offsets = _mm256_madd_epi16(scales16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb[j]->bsums)));
        offset_acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(offsets), _mm256_set1_ps(32.0f * d * yb[j]->d), offset_acc[j]);
      }
      const __m512i scales = _mm512_castsi256_si512(scales16);
      __m512i sum[NX];
      for (int j = 0; j < NX; j++) sum[j] = _mm512_setzero_si512();
      for (int h = 0; h < 2; h++) {
        const __m512i low = _mm512_loadu_si512(blk.ql + 64 * h);
        const __m512i pairs = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h)));
        // Upper half: the pairs shifted by two, so bits 4-5 (and, shifted left by 4, bits 0-1) of
        // each byte are the right two-bit field for every step.
        const __m512i shifted = _mm512_mask_srli_epi16(pairs, kUpperHalf, pairs, 2);
        const __m512i q0 = _mm512_ternarylogic_epi32(_mm512_and_si512(low, low4), _mm512_slli_epi16(shifted, 4), bits45, kOrAnd);
        const __m512i q1 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(low, 4), low4), shifted, bits45, kOrAnd);
        const __m512i scales0 = _mm512_permutexvar_epi16(index.step[2 * h], scales);
        const __m512i scales1 = _mm512_permutexvar_epi16(index.step[2 * h + 1], scales);
        for (int j = 0; j < NX; j++) {
          const __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512(yb[j]->qs + 128 * h));
          const __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512(yb[j]->qs + 128 * h + 64));
          sum[j] = _mm512_add_epi32(sum[j], _mm512_add_epi32(_mm512_madd_epi16(p0, scales0), _mm512_madd_epi16(p1, scales1)));
        }
      }
      for (int j = 0; j < NX; j++) acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[j]), _mm512_set1_ps(d * yb[j]->d), acc[j]);
    }
    for (int j = 0; j < NX; j++) out[j] = _mm512_reduce_add_ps(acc[j]) - hsum(offset_acc[j]);
  }
};

// The rows loop, prefetching the row kPrefetchRows ahead as the AVX2 rows loop does (see
// kernels_avx2.cpp for why).
constexpr int64_t kPrefetchRows = 4;

template <typename F>
void rows_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out) {
  const typename F::Indexes index;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const uint8_t*>(x);
  for (int64_t r = 0; r < n_rows; r++) {
    if (r + kPrefetchRows < n_rows) {
      const uint8_t* ahead = p + size_t(r + kPrefetchRows) * w_stride;
      for (size_t off = 0; off < w_stride; off += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    }
    F::template dot<1>(n / 256, reinterpret_cast<const typename F::Block*>(p + size_t(r) * w_stride), y, 0, index, out + r);
  }
}

// One weight row x n_x <= kMaxTile activation rows (prefill and batched decode).
template <typename F>
void tile_dot(int64_t n, const void* w, const void* x, size_t x_stride, int n_x, float* out) {
  static_assert(kMaxTile == 4, "tile_dot instantiates 1..4 rows");
  const typename F::Indexes index;
  const auto* blocks = static_cast<const typename F::Block*>(w);
  const auto* y = static_cast<const uint8_t*>(x);
  switch (n_x) {
    case 1: return F::template dot<1>(n / 256, blocks, y, x_stride, index, out);
    case 2: return F::template dot<2>(n / 256, blocks, y, x_stride, index, out);
    case 3: return F::template dot<3>(n / 256, blocks, y, x_stride, index, out);
    default: return F::template dot<4>(n / 256, blocks, y, x_stride, index, out);
  }
}

}  // namespace

RowsDotFn avx512_q4_k_rows() { return rows_dot<Q4K>; }
RowsDotFn avx512_q6_k_rows() { return rows_dot<Q6K>; }
RowDotFn avx512_q4_k_tile() { return tile_dot<Q4K>; }
RowDotFn avx512_q6_k_tile() { return tile_dot<Q6K>; }

}  // namespace loom::cpu

#else  // not built for AVX-512

namespace loom::cpu {
RowsDotFn avx512_q4_k_rows() { return nullptr; }
RowsDotFn avx512_q6_k_rows() { return nullptr; }
RowDotFn avx512_q4_k_tile() { return nullptr; }
RowDotFn avx512_q6_k_tile() { return nullptr; }
}  // namespace loom::cpu

#endif
