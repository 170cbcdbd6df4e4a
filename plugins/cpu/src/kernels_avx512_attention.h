// The AVX-512 table's attention helpers (kernels_avx512_attention.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Kernels::weighted_values in 512-bit registers, nullptr when the plugin was built without AVX-512.
decltype(Kernels::weighted_values) avx512_weighted_values();

}  // namespace loom::cpu
