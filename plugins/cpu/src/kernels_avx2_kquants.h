// AVX2 integer kernels for the GGML formats beyond the first five: Q5_K and IQ4_XS on BlockQ8K
// activation rows, Q4_1, Q5_1 and IQ4_NL on BlockQ8 rows (kernels_avx2_kquants.cpp), for the AVX2
// table and the tables built on it.
#pragma once

#include "kernels.h"

namespace loom::cpu {

WeightKernels avx2_q5_k_kernels();
WeightKernels avx2_q2_k_kernels();
WeightKernels avx2_q3_k_kernels();
WeightKernels avx2_iq4_xs_kernels();
// On BlockQ8 rows.
WeightKernels avx2_q4_1_kernels();
WeightKernels avx2_q5_1_kernels();
WeightKernels avx2_iq4_nl_kernels();
WeightKernels avx2_mxfp4_kernels();

}  // namespace loom::cpu
