// MXFP4's values, shared by the plugins that decode it (the CPU backend, the quantizer): the E2M1
// levels doubled, and ggml's E8M0 "half" scale 2^(e - 128), subnormal for the two smallest exponents.
// Header-only; like the rest of plugins/common it uses only the standard library and the C ABI.
#pragma once

#include <cstdint>
#include <cstring>

namespace loom::plugin_support {

inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float d;
  std::memcpy(&d, &bits, 4);
  return d;
}

// One block: 32 values from its exponent byte and 16 bytes of nibbles (j low, j + 16 high).
inline void mxfp4_decode_block(uint8_t e, const uint8_t* qs, float* y) {
  const float d = mxfp4_half_scale(e);
  for (int j = 0; j < 16; j++) {
    y[j] = float(kMxfp4Levels[qs[j] & 0x0F]) * d;
    y[j + 16] = float(kMxfp4Levels[qs[j] >> 4]) * d;
  }
}

}  // namespace loom::plugin_support
