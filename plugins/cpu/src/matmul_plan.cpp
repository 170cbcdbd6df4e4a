// Activation formats and row quantizers of the matmul paths (see matmul_plan.h).
#include "matmul_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels_dequant.h"

namespace loom::cpu {

MatmulPlan plan_for(loom_dtype type, int64_t n_in, const Kernels& k) {
  switch (type) {
    case LOOM_DTYPE_Q4_0: return {ActFormat::q8, k.q4_0, size_t(n_in / 32) * sizeof(BlockQ8)};
    case LOOM_DTYPE_Q5_0: return {ActFormat::q8, k.q5_0, size_t(n_in / 32) * sizeof(BlockQ8)};
    case LOOM_DTYPE_Q8_0: return {ActFormat::q8, k.q8_0, size_t(n_in / 32) * sizeof(BlockQ8)};
    case LOOM_DTYPE_Q4_K: return {ActFormat::q8k, k.q4_k, size_t(n_in / 256) * sizeof(BlockQ8K)};
    case LOOM_DTYPE_Q6_K: return {ActFormat::q8k, k.q6_k, size_t(n_in / 256) * sizeof(BlockQ8K)};
    case LOOM_DTYPE_F16: return {ActFormat::f32, k.f16, size_t(n_in) * 4};
    case LOOM_DTYPE_BF16: return {ActFormat::f32, k.bf16, size_t(n_in) * 4};
    case LOOM_DTYPE_F32: return {ActFormat::f32, k.f32, size_t(n_in) * 4};
    case LOOM_DTYPE_F8_E4M3_B32:
      if (k.f8_e4m3_b32.tile != nullptr) return {ActFormat::f32, k.f8_e4m3_b32, size_t(n_in) * 4};
      [[fallthrough]];
    default: {
      // Types whose integer kernels only some tables have.
      const WeightKernels* integer = type == LOOM_DTYPE_Q5_K     ? &k.q5_k
                                     : type == LOOM_DTYPE_Q2_K   ? &k.q2_k
                                     : type == LOOM_DTYPE_Q3_K   ? &k.q3_k
                                     : type == LOOM_DTYPE_IQ4_XS ? &k.iq4_xs
                                     : type == LOOM_DTYPE_Q4_1   ? &k.q4_1
                                     : type == LOOM_DTYPE_Q5_1   ? &k.q5_1
                                     : type == LOOM_DTYPE_IQ4_NL ? &k.iq4_nl
                                     : type == LOOM_DTYPE_MXFP4  ? &k.mxfp4
                                                                 : nullptr;
      if (integer != nullptr && integer->tile != nullptr) {
        const bool super_blocks = type == LOOM_DTYPE_Q5_K || type == LOOM_DTYPE_IQ4_XS || type == LOOM_DTYPE_Q2_K ||
                                  type == LOOM_DTYPE_Q3_K;
        return super_blocks ? MatmulPlan{ActFormat::q8k, *integer, size_t(n_in / 256) * sizeof(BlockQ8K)}
                            : MatmulPlan{ActFormat::q8, *integer, size_t(n_in / 32) * sizeof(BlockQ8)};
      }
      const WeightKernels decoded = dequant_kernels(type, k);
      if (decoded.tile == nullptr) unsupported(std::string("MATMUL: weight dtype ") + dtype_name(type) + " has no fast kernel");
      return {ActFormat::f32, decoded, size_t(n_in) * 4};
    }
  }
}

void quantize_activation(const MatmulPlan& plan, RowsQuantizeFn own_layout, const Kernels& k, const float* row, void* out, int64_t n) {
  if (own_layout) own_layout(row, out, n);
  else if (plan.format == ActFormat::q8) k.quantize_q8(row, static_cast<BlockQ8*>(out), n);
  else if (plan.format == ActFormat::q8k) k.quantize_q8k(row, static_cast<BlockQ8K*>(out), n);
  else std::copy(row, row + n, static_cast<float*>(out));
}

void round_like_integer_kernels(const MatmulPlan& plan, const Kernels& k, const float* row, float* out, int64_t n) {
  if (plan.format == ActFormat::q8) {
    std::vector<BlockQ8> blocks(size_t(n / 32));
    k.quantize_q8(row, blocks.data(), n);
    for (int64_t i = 0; i < n; i++) out[i] = float(blocks[size_t(i / 32)].qs[i % 32]) * blocks[size_t(i / 32)].d;
  } else if (plan.format == ActFormat::q8k) {
    std::vector<BlockQ8K> blocks(size_t(n / 256));
    k.quantize_q8k(row, blocks.data(), n);
    for (int64_t i = 0; i < n; i++) out[i] = float(blocks[size_t(i / 256)].qs[i % 256]) * blocks[size_t(i / 256)].d;
  } else {
    std::copy(row, row + n, out);
  }
}

}  // namespace loom::cpu
