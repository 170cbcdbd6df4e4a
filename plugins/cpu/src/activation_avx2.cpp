// Vectorised GLU activations for the fast layer (AVX2/FMA, compiled like kernels_avx2.cpp).
//
// SiLU and tanh-GELU are both x * sigmoid(z): SiLU with z = x, GELU with z = 2 * sqrt(2/pi) *
// (x + 0.044715 x^3), because 0.5 * (1 + tanh(u)) == sigmoid(2u). So one vector exp and one divide
// per element replace a libm tanhf/expf call per element (3% of a Gemma decode step).
#include "activation.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include "cpu_tensor.h"

namespace loom::cpu {
namespace {

// e^x: +inf above 88.7 (so x / (1 + e^-z) still reaches -0 for huge negative x), flushed to about
// 1e-38 below -87.3, and in between x = n ln2 + r with |r| <= ln2/2, e^r from
// a degree-6 polynomial (Taylor terms; error below 2e-7 relative on that interval), 2^n from the
// exponent bits.
inline __m256 exp_ps(__m256 x) {
  const __m256 overflow = _mm256_cmp_ps(x, _mm256_set1_ps(88.7f), _CMP_GT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, with ln2 split in two so the product is exact to float precision.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n is in [-126, 128]: at 128, build 2^127 and double it so the exponent field never overflows.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half_n = _mm256_srai_epi32(ni, 1);
  const __m256 scale_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half_n, _mm256_set1_epi32(127)), 23));
  const __m256 scale_b =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half_n), _mm256_set1_epi32(127)), 23));
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, scale_a), scale_b);
  return _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_huge_valf()), overflow);
}

// z for x * sigmoid(z), per activation.
template <loom_activation Act>
inline __m256 sigmoid_arg(__m256 x) {
  if constexpr (Act == LOOM_ACTIVATION_SILU) {
    return x;
  } else {
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x);
    return _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f), inner);
  }
}

template <loom_activation Act>
void gated_row(const float* g, const float* u, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), sigmoid_arg<Act>(x)));
    __m256 y = _mm256_div_ps(x, _mm256_add_ps(one, e));
    if (u) y = _mm256_mul_ps(y, _mm256_loadu_ps(u + i));
    _mm256_storeu_ps(out + i, y);
  }
  for (; i < n; i++) out[i] = activation_value(Act, g[i]) * (u ? u[i] : 1.0f);
}

}  // namespace

float exp_shifted_avx2(float* x, int64_t n, float shift) {
  const __m256 m = _mm256_set1_ps(shift), minus_inf = _mm256_set1_ps(-__builtin_huge_valf());
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(v, minus_inf, _CMP_EQ_OQ), exp_ps(_mm256_sub_ps(v, m)));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

bool activation_row_avx2(loom_activation act, const float* g, const float* u, float* out, int64_t n) {
  switch (act) {
    case LOOM_ACTIVATION_SILU: gated_row<LOOM_ACTIVATION_SILU>(g, u, out, n); return true;
    case LOOM_ACTIVATION_GELU_TANH: gated_row<LOOM_ACTIVATION_GELU_TANH>(g, u, out, n); return true;
    default: return false;
  }
}

}  // namespace loom::cpu

#else

namespace loom::cpu {
bool activation_row_avx2(loom_activation, const float*, const float*, float*, int64_t) { return false; }
}  // namespace loom::cpu

#endif
