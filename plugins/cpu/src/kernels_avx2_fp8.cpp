// FP8 weights on float activations. An E4M3 code becomes F16 bits with a shift: E4M3's exponent
// (bias 7) and mantissa bits land in the low bits of F16's fields (bias 15), so the F16 value is the
// code's value times 2^-8, subnormals included; F16C widens 8 of them per instruction. The 2^8 goes
// into the block scale, which keeps the decoded value exact: (v / 256) * (d * 256) is the same real
// product as v * d, rounded once. The dot products sum each block of 32 and scale the sum once.
#include "kernels_avx2_fp8.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "kernels_avx2_common.h"

namespace loom::cpu {

namespace {

using avx2::act_row;
using avx2::hsum;

// Codes q[0..15] as floats, each the code's value / 256. Each code goes to the high byte of a 16-bit
// lane (an unpack with zeros: sign at bit 15, exponent and mantissa at bits 14-8); an arithmetic
// shift right by one moves exponent and mantissa into F16's fields and copies the sign into bit 14,
// which the mask clears. All in 128-bit halves: first-generation Zen splits 256-bit integer ops in two.
inline void e4m3_16(const uint8_t* q, __m256& low, __m256& high) {
  const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i keep = _mm_set1_epi16(int16_t(0xBFFF)), zero = _mm_setzero_si128();
  low = _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_unpacklo_epi8(zero, codes), 1), keep));
  high = _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(_mm_unpackhi_epi8(zero, codes), 1), keep));
}

template <int NX>
void dot_f8_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* blocks = static_cast<const loom_block_f8_e4m3_b32*>(w);
  __m256 acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / LOOM_QK_F8_E4M3_B32; b++) {
    __m256 v[4];
    e4m3_16(blocks[b].qs, v[0], v[1]);
    e4m3_16(blocks[b].qs + 16, v[2], v[3]);
    const __m256 d = _mm256_set1_ps(blocks[b].d * 256.0f);
    for (int j = 0; j < NX; j++) {
      const float* y = act_row<float>(x, xs, j) + b * LOOM_QK_F8_E4M3_B32;
      __m256 sum = _mm256_mul_ps(v[0], _mm256_loadu_ps(y));
      sum = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(y + 8), sum);
      sum = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(y + 16), sum);
      sum = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(y + 24), sum);
      acc[j] = _mm256_fmadd_ps(d, sum, acc[j]);
    }
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]);
}

void decode_f8(const void* row, float* out, int64_t n) {
  const auto* blocks = static_cast<const loom_block_f8_e4m3_b32*>(row);
  for (int64_t b = 0; b < n / LOOM_QK_F8_E4M3_B32; b++, out += LOOM_QK_F8_E4M3_B32) {
    __m256 v[4];
    e4m3_16(blocks[b].qs, v[0], v[1]);
    e4m3_16(blocks[b].qs + 16, v[2], v[3]);
    const __m256 d = _mm256_set1_ps(blocks[b].d * 256.0f);
    for (int k = 0; k < 4; k++) _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(v[k], d));
  }
}

}  // namespace

WeightKernels avx2_f8_e4m3_b32_kernels() {
  return {avx2::tile_dispatch<dot_f8_t<1>, dot_f8_t<2>, dot_f8_t<3>, dot_f8_t<4>>, avx2::rows_dot<dot_f8_t<1>>};
}
RowDecodeFn avx2_f8_e4m3_b32_decoder() { return decode_f8; }

}  // namespace loom::cpu

#else

namespace loom::cpu {
WeightKernels avx2_f8_e4m3_b32_kernels() { return {nullptr, nullptr}; }
RowDecodeFn avx2_f8_e4m3_b32_decoder() { return nullptr; }
}  // namespace loom::cpu

#endif
