// The AVX2 table's encoder attention (kernels_avx2_encoder.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Kernels::encoder_attention with keys across 256-bit lanes (head sizes a multiple of 8, up to 128);
// nullptr when built without AVX2.
decltype(Kernels::encoder_attention) avx2_encoder_attention();

}  // namespace loom::cpu
