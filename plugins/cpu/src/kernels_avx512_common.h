// Helpers shared by the AVX-512 kernel files (include only from files compiled with -mavx512*).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace loom::cpu::avx512 {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// One 32-value activation block as the AVX-512 kernels quantize it: scale = amax / 127 (0 for an
// all-zero block), values rounded to nearest even (the default MXCSR mode, as std::nearbyint), each
// 16-value half as 16 int8. The row and panel layouts both use it, so a token's integer sums are the
// same whichever kernel a batch size picks.
struct QuantizedBlock {
  float scale;
  __m128i half[2];
};
inline QuantizedBlock quantize_block(const float* x) {
  const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
  const float scale = amax / 127.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  const __m512 mul = _mm512_set1_ps(inv);
  return {scale,
          {_mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(lo, mul))),
           _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(hi, mul)))}};
}

// Four bytes broadcast to all sixteen int32 lanes (one broadcast load when the bytes are in memory).
inline __m512i broadcast_group(const uint8_t* bytes) {
  int32_t group;
  std::memcpy(&group, bytes, 4);
  return _mm512_set1_epi32(group);
}

}  // namespace loom::cpu::avx512
