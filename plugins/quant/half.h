// f32 <-> f16 / bf16 with round-to-nearest-even, bit-identical to F16C's _cvtss_sh(x, 0) (what
// GGML uses on x86) and to GGML's portable fallback, so scales stored in blocks match GGML's bytes.
#pragma once

#include <cmath>
#include <cstdint>

namespace loom::quant {

uint16_t fp32_to_fp16(float value);
float fp16_to_fp32(uint16_t bits);
uint16_t fp32_to_bf16(float value);
float bf16_to_fp32(uint16_t bits);

inline bool is_fp16_finite(uint16_t bits) { return (bits & 0x7c00u) != 0x7c00u; }

// GGML's nearest_int: round half to even, for the small magnitudes the quantizers produce.
// Out-of-range magnitudes (only from degenerate scales) saturate instead of overflowing the int.
inline int nearest_int(float value) {
  if (!(std::fabs(value) < 1073741824.0f)) return value > 0 ? 1073741824 : -1073741824;
  return static_cast<int>(std::nearbyint(value));
}

}  // namespace loom::quant
