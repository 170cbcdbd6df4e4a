// AVX2 kernels for FP8 weights (LOOM_DTYPE_F8_E4M3_B32, the FP8 checkpoints' layers) on float
// activation rows (kernels_avx2_fp8.cpp), for the AVX2 table and the tables built on it.
#pragma once

#include "kernels.h"

namespace loom::cpu {

WeightKernels avx2_f8_e4m3_b32_kernels();
// One row's values, exactly the reference decoding's (code value * d in float32), for the float GEMM.
RowDecodeFn avx2_f8_e4m3_b32_decoder();

}  // namespace loom::cpu
