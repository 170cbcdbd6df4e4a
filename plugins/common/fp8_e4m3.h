// OCP FP8 E4M3 ("FN": no infinities), shared by the plugins that read it: the CPU backend (the FP8 KV
// cache LOOM_DTYPE_F8_E4M3 and the FP8 weights LOOM_DTYPE_F8_E4M3_B32) and the quantizer. 1 sign bit, 4
// exponent bits of bias 7, 3 mantissa bits; subnormals below 2^-6 in steps of 2^-9; the largest
// finite value is 448 and 0x7F / 0xFF are NaN. Encoding rounds to nearest, ties to even, and
// saturates to +-448 as vLLM's and CUDA's satfinite conversions do.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace loom::plugin_support {

inline uint8_t float_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return uint8_t(sign | 0x7F);
  const float a = std::fabs(x);
  if (a >= 448.0f) return uint8_t(sign | 0x7E);
  if (a < 0.015625f) return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f)));  // subnormal (8 = 2^-6, normal)
  int e = 0;
  const float fraction = std::frexp(a, &e);  // a = fraction * 2^e, fraction in [0.5, 1)
  int exponent = e - 1;
  auto mantissa = int(std::nearbyint((fraction * 2.0f - 1.0f) * 8.0f));
  if (mantissa == 8) mantissa = 0, ++exponent;
  return uint8_t(sign | uint8_t((exponent + 7) << 3) | uint8_t(mantissa));
}

inline float e4m3_to_float(uint8_t b) {
  const int exponent = (b >> 3) & 15, mantissa = b & 7;
  float magnitude;
  if (exponent == 0) magnitude = std::ldexp(float(mantissa), -9);
  else if (exponent == 15 && mantissa == 7) magnitude = NAN;
  else magnitude = std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
  return (b & 0x80) ? -magnitude : magnitude;
}

// All 256 values, for decoding rows.
inline const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; b++) t[size_t(b)] = e4m3_to_float(uint8_t(b));
    return t;
  }();
  return table;
}

}  // namespace loom::plugin_support
