// Encoder ops (ABI 1.9): layer norm, attention over plain tensors, image patches and 2-D average
// pooling, what a vision encoder needs beyond the decoder ops, and CLAMP (ABI 1.11). As with the recurrent ops, one
// implementation serves both layers: the reference runs its tasks in order with in-order dot products,
// the fast layer spreads them over the pool and takes its kernel table's SIMD dot product and axpy.
#pragma once

#include <vector>

#include "cpu_tensor.h"
#include "recurrent_ops.h"

namespace loom::cpu {

using AxpyFn = void (*)(float a, const float* x, float* y, int64_t n);  // y += a * x
void axpy_in_order(float a, const float* x, float* y, int64_t n);

struct EncoderKernels {
  DotFn dot = dot_in_order;
  AxpyFn axpy = axpy_in_order;
};

// ATTENTION's sequences: the seqs table (checked against the rows of q), or all rows as one.
struct RowRange {
  int64_t first, count;
};
std::vector<RowRange> attention_sequences(const OpArgs& a);

void layer_norm(const OpArgs& a, const TaskRunner& run);
void encoder_attention(const OpArgs& a, const TaskRunner& run, const EncoderKernels& kernels = {});
void image_patches(const OpArgs& a, const TaskRunner& run);
void pool_2d(const OpArgs& a, const TaskRunner& run);
void clamp(const OpArgs& a, const TaskRunner& run);

}  // namespace loom::cpu
