// f32 <-> f16 / bf16 with round-to-nearest-even, bit-identical to F16C's _cvtss_sh(x, 0) (what
// GGML uses on x86) and to GGML's portable fallback, so scales stored in blocks match GGML's bytes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loom::quant {

uint16_t fp32_to_fp16(float value);
float fp16_to_fp32(uint16_t bits);
uint16_t fp32_to_bf16(float value);
float bf16_to_fp32(uint16_t bits);

inline bool is_fp16_finite(uint16_t bits) { return (bits & 0x7c00u) != 0x7c00u; }

// GGML's nearest_int: adding 1.5 * 2^23 makes the FPU round to an integer (half to even) and
// leaves it in the low mantissa bits. Valid for |value| <= 2^22 - 1; larger magnitudes (only from
// degenerate scales) saturate instead of wrapping.
inline int nearest_int(float value) {
  if (!(std::fabs(value) <= 4194303.0f)) return value > 0 ? 4194303 : -4194303;
  const float shifted = value + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace loom::quant
