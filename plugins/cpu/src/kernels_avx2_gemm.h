// The AVX2 table's float GEMM for batched matmuls (kernels_avx2_gemm.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

FloatGemm avx2_float_gemm();
// Kernels::weighted_values for the AVX2 table (nullptr without the AVX2 file).
decltype(Kernels::weighted_values) avx2_weighted_values();

}  // namespace loom::cpu
