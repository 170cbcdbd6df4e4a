// The AVX-512 table's encoder attention (kernels_avx512_encoder.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Kernels::encoder_attention with keys across 512-bit lanes; nullptr when built without AVX-512.
decltype(Kernels::encoder_attention) avx512_encoder_attention();

}  // namespace loom::cpu
