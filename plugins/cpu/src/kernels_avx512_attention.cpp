// The AVX-512 table's weighted values for attention (Kernels::weighted_values). Its contract fixes
// the arithmetic: float_dots' (kernels_avx2_gemm.cpp) over the values transposed, eight lane sums
// in key order (lane l takes keys j = l mod 8, fma(v[j][d], p[j], sum)) and then the tree
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). The AVX2 version keeps the eight lanes of every
// d in memory, a load and a store around each FMA; here 16 values of d at a time keep their eight
// lanes in registers, so a key costs a load, a broadcast and an FMA per 16 values. The sums are the
// same FMAs in the same order, so the results are the same to the bit.
#include "kernels_avx512_attention.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__F16C__)

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

namespace loom::cpu {
namespace {

// out[0 .. width) for one row: width 16, or 8 with the mask of the low eight lanes.
inline void weighted_chunk(const float* p, int64_t n_keys, const float* values, int64_t head_dim, __mmask16 mask, float* out) {
  __m512 lane[8];
  for (int l = 0; l < 8; l++) lane[l] = _mm512_setzero_ps();
  for (int64_t j0 = 0; j0 < n_keys; j0 += 8)
    for (int l = 0; l < 8; l++)
      lane[l] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, values + (j0 + l) * head_dim), _mm512_set1_ps(p[j0 + l]), lane[l]);
  const __m512 even = _mm512_add_ps(_mm512_add_ps(lane[0], lane[4]), _mm512_add_ps(lane[2], lane[6]));
  const __m512 odd = _mm512_add_ps(_mm512_add_ps(lane[1], lane[5]), _mm512_add_ps(lane[3], lane[7]));
  _mm512_mask_storeu_ps(out, mask, _mm512_add_ps(even, odd));
}

void weighted_values(const float* p, int64_t p_stride, int64_t n_rows, int64_t n_keys, const float* values, int64_t head_dim, float* out,
                     int64_t out_stride) {
  for (int64_t t = 0; t < n_rows; t++) {
    int64_t d = 0;
    for (; d + 16 <= head_dim; d += 16) weighted_chunk(p + t * p_stride, n_keys, values + d, head_dim, 0xFFFF, out + t * out_stride + d);
    if (d < head_dim) weighted_chunk(p + t * p_stride, n_keys, values + d, head_dim, 0x00FF, out + t * out_stride + d);
  }
}

}  // namespace

decltype(Kernels::weighted_values) avx512_weighted_values() { return weighted_values; }

}  // namespace loom::cpu

#else

namespace loom::cpu {
decltype(Kernels::weighted_values) avx512_weighted_values() { return nullptr; }
}  // namespace loom::cpu

#endif
