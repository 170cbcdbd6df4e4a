// AVX-512 panel kernels for batched Q4_0 / Q5_0 / Q8_0 (kernels_avx512_panel.cpp) and Q4_K / Q6_K
// (kernels_avx512_panel_kquants.cpp) matmuls.
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Fills the table's q*_panel kernels and panel_min_tokens; leaves the table
// unchanged when the plugin was built without the AVX-512 files.
void add_avx512_panels(Kernels& k);
// The Q4_K / Q6_K panels (kernels_avx512_panel_kquants.cpp), called by add_avx512_panels.
void add_avx512_kquant_panels(Kernels& k);

}  // namespace loom::cpu
