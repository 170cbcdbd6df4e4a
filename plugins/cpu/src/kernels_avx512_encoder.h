// The AVX-512 table's encoder attention (kernels_avx512_encoder.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Kernels::encoder_attention with keys across 512-bit lanes; nullptr when built without AVX-512.
decltype(Kernels::encoder_attention) avx512_encoder_attention();
// Kernels::float_weight_gemm as 512-bit outer products over packed panels of weight rows, with the
// AVX2 decoders; `avx2` itself when built without AVX-512.
FloatGemm avx512_float_weight_gemm(const FloatGemm& avx2);

}  // namespace loom::cpu
