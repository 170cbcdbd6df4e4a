// The AVX2 table's float GEMM for batched matmuls (kernels_avx2_gemm.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

FloatGemm avx2_float_gemm();

}  // namespace loom::cpu
