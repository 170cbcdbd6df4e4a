// AVX-512 panel kernels (kernels_avx512_panel.cpp) for batched Q4_0 / Q5_0 / Q8_0 matmuls.
#pragma once

#include "kernels.h"

namespace loom::cpu {

// Fills the table's q4_0_panel / q5_0_panel / q8_0_panel and panel_min_tokens; leaves the table
// unchanged when the plugin was built without the AVX-512 files.
void add_avx512_panels(Kernels& k);

}  // namespace loom::cpu
