// AVX-512 panel kernels for batched matmuls: the 32-value block types (kernels_avx512_panel.cpp)
// and the 256-value super-block types Q4_K / Q5_K / IQ4_XS / Q6_K (kernels_avx512_panel_kquants.cpp).
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Fills the table's q*_panel kernels and panel_min_tokens; leaves the table
// unchanged when the plugin was built without the AVX-512 files.
void add_avx512_panels(Kernels& k);
// The super-block types' panels (kernels_avx512_panel_kquants.cpp), called by add_avx512_panels.
void add_avx512_kquant_panels(Kernels& k);

}  // namespace loom::cpu
