// GGML's block layouts for the formats loom/dtype.h does not spell out (its public header carries
// only the formats every backend reads). Byte for byte as ggml-common.h lays them out.
#pragma once

#include <cstdint>

#include "loom/dtype.h"

namespace loom::quant {

struct BlockQ4_1 {  // x = d * q + m, q in 0..15
  loom_half d, m;
  uint8_t qs[16];
};
struct BlockQ5_1 {  // x = d * q + m, q in 0..31 (fifth bits in qh)
  loom_half d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ2_K {  // 16 sub-blocks of 16: 4-bit scale and min each; x = d * sc * q - dmin * m
  uint8_t scales[16];
  uint8_t qs[64];
  loom_half d, dmin;
};
struct BlockQ3_K {  // 16 sub-blocks of 16: signed 6-bit scales; q in -4..3 (third bits in hmask)
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  loom_half d;
};
struct BlockQ5_K {  // as Q4_K with a fifth bit per value in qh
  loom_half d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockIQ4_NL {  // 32 values, each an index into kIq4Values scaled by d
  loom_half d;
  uint8_t qs[16];
};
struct BlockIQ4_XS {  // 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h)
  loom_half d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_1) == 24, "GGML legacy block sizes");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ5_K) == 176, "GGML K block sizes");
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136, "GGML IQ4 block sizes");

// IQ4_NL / IQ4_XS: the 16 non-uniform levels (denser near zero, where weights cluster).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

}  // namespace loom::quant
