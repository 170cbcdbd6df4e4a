// The GGML block layouts the ABI header does not define (Q4_1, Q5_1, the K-quants beyond Q4_K/Q6_K,
// the IQ4 formats), byte for byte as ggml-common.h stores them, for the reference decoders
// (dequantize_more.cpp) and the AVX2 kernels alike.
#pragma once

#include <cstdint>

namespace loom::cpu {

struct BlockQ4_1 {  // x = d q + m
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ2K {      // x = d * (scale nibble) * q - dmin * (min nibble)
  uint8_t scales[16];  // 4-bit scale and 4-bit min of each 16 values
  uint8_t qs[64];
  uint16_t d, dmin;
};
struct BlockQ3K {      // x = d * (6-bit scale - 32) * (q - 4 * !hbit)
  uint8_t hmask[32];   // the third bit of each value
  uint8_t qs[64];      // the low two bits
  uint8_t scales[12];  // sixteen 6-bit scales
  uint16_t d;
};
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];  // as Q4_K
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};
struct BlockIQ4NL {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockIQ4XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_1) == 24 && sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110 &&
              sizeof(BlockQ5K) == 176 && sizeof(BlockIQ4NL) == 18 && sizeof(BlockIQ4XS) == 136);

// The sixteen non-uniform levels a 4-bit IQ4_NL / IQ4_XS index selects.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_XS: the scale of run r (32 values) of a block, its low 4 bits in scales_l and high 2 in
// scales_h, offset by 32.
inline int iq4_xs_run_scale(const BlockIQ4XS& b, int r) {
  return (((b.scales_l[r / 2] >> (4 * (r % 2))) & 0xF) | (((b.scales_h >> (2 * r)) & 3) << 4)) - 32;
}

}  // namespace loom::cpu
