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

// The sixteen IQ4_NL / IQ4_XS levels (ggml_blocks.h's kIq4Levels) plus 128, as unsigned bytes for
// vpdpbusd, looked up by vpshufb.
alignas(16) inline constexpr uint8_t kIq4LevelsPlus128[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
inline __m128i iq4_level_table() { return _mm_load_si128(reinterpret_cast<const __m128i*>(kIq4LevelsPlus128)); }

// Four bytes broadcast to all sixteen int32 lanes (one broadcast load when the bytes are in memory).
inline __m512i broadcast_group(const uint8_t* bytes) {
  int32_t group;
  std::memcpy(&group, bytes, 4);
  return _mm512_set1_epi32(group);
}

// The vector operations of the panel kernels for panels of 16 tokens (512-bit registers) and of 8
// (256-bit: a batch of a few tokens, a mixture-of-experts expert's share, leaves fewer lanes idle).
template <int kLanes>
struct Lanes;

template <>
struct Lanes<16> {
  using I = __m512i;
  using F = __m512;
  static I load(const void* p) { return _mm512_load_si512(p); }
  static F load_floats(const void* p) { return _mm512_load_ps(p); }
  static I zero() { return _mm512_setzero_si512(); }
  static F zero_floats() { return _mm512_setzero_ps(); }
  static I broadcast(const uint8_t* bytes) { return broadcast_group(bytes); }
  static I dot(I acc, I u, I x) { return _mm512_dpbusd_epi32(acc, u, x); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I bxor(I a, I b) { return _mm512_xor_si512(a, b); }
  static F to_floats(I v) { return _mm512_cvtepi32_ps(v); }
  static F splat(float f) { return _mm512_set1_ps(f); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
};

template <>
struct Lanes<8> {
  using I = __m256i;
  using F = __m256;
  static I load(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
  static F load_floats(const void* p) { return _mm256_load_ps(static_cast<const float*>(p)); }
  static I zero() { return _mm256_setzero_si256(); }
  static F zero_floats() { return _mm256_setzero_ps(); }
  static I broadcast(const uint8_t* bytes) {
    int32_t group;
    std::memcpy(&group, bytes, 4);
    return _mm256_set1_epi32(group);
  }
  static I dot(I acc, I u, I x) { return _mm256_dpbusd_epi32(acc, u, x); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I bxor(I a, I b) { return _mm256_xor_si256(a, b); }
  static F to_floats(I v) { return _mm256_cvtepi32_ps(v); }
  static F splat(float f) { return _mm256_set1_ps(f); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
};

}  // namespace loom::cpu::avx512
