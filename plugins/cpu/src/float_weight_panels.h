// Weight rows packed for the outer-product float GEMMs (FloatGemm::pack, kernels_avx2_gemm.cpp and
// kernels_avx512_encoder.cpp): for each block of Depth values of k, each panel of Panel rows as
// [depth][Panel] floats, so one step of k reads a panel's values for all its rows in one run; rows past
// n_rows are zero. Plain C++: each table instantiates it with its own vector width.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace loom::cpu {

template <int Panel>
int64_t weight_panel_count(int64_t n_rows) {
  return (n_rows + Panel - 1) / Panel;
}

template <int Panel>
size_t weight_panel_floats(int64_t n, int64_t n_rows) {
  return size_t(weight_panel_count<Panel>(n_rows) * Panel * n);
}

template <int Panel, int64_t Depth>
void pack_weight_panels(const float* w, int64_t w_stride, int64_t n, int64_t n_rows, float* packed) {
  const int64_t panels = weight_panel_count<Panel>(n_rows);
  for (int64_t k0 = 0; k0 < n; k0 += Depth) {
    const int64_t depth = std::min(Depth, n - k0);
    for (int64_t p = 0; p < panels; p++) {
      float* panel = packed + k0 * panels * Panel + p * depth * Panel;
      const int live = int(std::min<int64_t>(Panel, n_rows - p * Panel));
      for (int j = 0; j < live; j++) {
        const float* row = w + (p * Panel + j) * w_stride + k0;
        for (int64_t k = 0; k < depth; k++) panel[k * Panel + j] = row[k];
      }
      for (int j = live; j < Panel; j++)
        for (int64_t k = 0; k < depth; k++) panel[k * Panel + j] = 0.0f;
    }
  }
}

}  // namespace loom::cpu
