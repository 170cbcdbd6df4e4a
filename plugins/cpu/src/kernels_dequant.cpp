#include "kernels_dequant.h"

#include <atomic>
#include <vector>

#include "dequantize_more.h"

namespace loom::cpu {

namespace {

// The table's float dot product for the running CPU (AVX2/AVX-512 when present): the kernels below
// have the plain RowDotFn signature and cannot carry it. Every table sets the same kind of function.
std::atomic<float (*)(const float*, const float*, int64_t)> g_vdot{nullptr};

std::vector<float>& decoded_row() {
  static thread_local std::vector<float> row;
  return row;
}

template <loom_dtype Type>
void tile(int64_t n, const void* w, const void* x, size_t x_stride, int n_x, float* out) {
  std::vector<float>& row = decoded_row();
  row.resize(size_t(n));
  dequantize_extra(Type, w, row.data(), n);
  for (int j = 0; j < n_x; j++) {
    out[j] = g_vdot.load(std::memory_order_relaxed)(row.data(), reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + size_t(j) * x_stride), n);
  }
}

template <loom_dtype Type>
void rows(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out) {
  std::vector<float>& row = decoded_row();
  row.resize(size_t(n));
  for (int64_t r = 0; r < n_rows; r++) {
    dequantize_extra(Type, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, row.data(), n);
    out[r] = g_vdot.load(std::memory_order_relaxed)(row.data(), static_cast<const float*>(x), n);
  }
}

template <loom_dtype Type>
WeightKernels kernels_for() {
  return {tile<Type>, rows<Type>};
}

}  // namespace

WeightKernels dequant_kernels(loom_dtype type, const Kernels& k) {
  g_vdot.store(k.vdot_f32, std::memory_order_relaxed);
  switch (type) {
    case LOOM_DTYPE_Q4_1: return kernels_for<LOOM_DTYPE_Q4_1>();
    case LOOM_DTYPE_Q5_1: return kernels_for<LOOM_DTYPE_Q5_1>();
    case LOOM_DTYPE_Q2_K: return kernels_for<LOOM_DTYPE_Q2_K>();
    case LOOM_DTYPE_Q3_K: return kernels_for<LOOM_DTYPE_Q3_K>();
    case LOOM_DTYPE_Q5_K: return kernels_for<LOOM_DTYPE_Q5_K>();
    case LOOM_DTYPE_IQ4_NL: return kernels_for<LOOM_DTYPE_IQ4_NL>();
    case LOOM_DTYPE_IQ4_XS: return kernels_for<LOOM_DTYPE_IQ4_XS>();
    case LOOM_DTYPE_MXFP4: return kernels_for<LOOM_DTYPE_MXFP4>();
    case LOOM_DTYPE_F8_E4M3_B32: return kernels_for<LOOM_DTYPE_F8_E4M3_B32>();
    default: return {nullptr, nullptr};
  }
}

}  // namespace loom::cpu
