#include "half.h"

#include <cstring>

namespace loom::quant {

namespace {
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
}  // namespace

uint16_t fp32_to_fp16(float value) {
  uint32_t x = bits_of(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  // 65520 and above round (to even) past the largest half, 65504.
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (x < 0x38800000u) {
    // Below the smallest normal half: adding 0.5 aligns the value to the 2^-24 subnormal step,
    // and the float addition itself rounds to nearest even.
    const float aligned = float_of(x) + 0.5f;
    return static_cast<uint16_t>(sign | (bits_of(aligned) - 0x3f000000u));
  }
  const uint32_t mantissa_odd = (x >> 13) & 1u;
  x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mantissa_odd;  // rebias, round to nearest even
  return static_cast<uint16_t>(sign | (x >> 13));
}

float fp16_to_fp32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // exact
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return float_of(sign | 0x7f800000u | (mantissa << 13));
  return float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t fp32_to_bf16(float value) {
  const uint32_t u = bits_of(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

float bf16_to_fp32(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

}  // namespace loom::quant
