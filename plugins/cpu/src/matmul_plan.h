// How a matmul's activation rows meet a weight type's kernels: the activation format the type's
// integer kernels read, and the row quantizers (shared by the decode, tile, panel and float paths).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_tensor.h"
#include "kernels.h"

namespace loom::cpu {

enum class ActFormat { q8, q8k, f32 };

struct MatmulPlan {
  ActFormat format;
  WeightKernels dot;
  size_t act_row_bytes;
};

// The kernels and activation format for weights of `type` with rows of n_in values; throws
// (unsupported) for a type the table cannot multiply.
MatmulPlan plan_for(loom_dtype type, int64_t n_in, const Kernels& k);

// One activation row in the format the kernel reads: its own layout when it brings a quantizer
// (own_layout), else the weight type's usual one.
void quantize_activation(const MatmulPlan& plan, RowsQuantizeFn own_layout, const Kernels& k, const float* row, void* out, int64_t n);

// The values an activation row takes in the integer kernels: rounded to the weight type's int8
// blocks (q x d per value) when its plan quantizes, unchanged when it reads floats.
void round_like_integer_kernels(const MatmulPlan& plan, const Kernels& k, const float* row, float* out, int64_t n);

}  // namespace loom::cpu
