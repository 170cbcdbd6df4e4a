// AVX-512 kernels for the K-quants (kernels_avx512_kquants.cpp), for the AVX-512 table.
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Many Q4_K / Q6_K weight rows x one BlockQ8K activation row; nullptr when the plugin was built
// without the AVX-512 file.
RowsDotFn avx512_q4_k_rows();
RowsDotFn avx512_q6_k_rows();
// One Q4_K / Q6_K weight row x up to kMaxTile BlockQ8K activation rows.
RowDotFn avx512_q4_k_tile();
RowDotFn avx512_q6_k_tile();

}  // namespace loom::cpu
