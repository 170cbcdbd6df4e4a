// Recurrent ops (ABI 1.6): the short causal convolution and the gated delta rule of Gated DeltaNet
// layers, each over per-sequence state slots. One implementation serves both layers: the reference
// runs every task in order with plain in-order dot products, the fast layer spreads the tasks over
// the pool (sequences x heads for the delta rule, channel ranges for the convolution) and takes its
// kernel table's SIMD dot product, so the two differ only in summation order.
#pragma once

#include <cstdint>
#include <functional>

#include "cpu_tensor.h"

namespace loom::cpu {

// Runs fn(task) for task in [0, n_tasks); the reference passes a plain loop, the fast layer its pool.
using TaskRunner = std::function<void(int64_t n_tasks, const std::function<void(int64_t)>& fn)>;

using DotFn = float (*)(const float* a, const float* b, int64_t n);
float dot_in_order(const float* a, const float* b, int64_t n);

void ssm_conv(const OpArgs& a, const TaskRunner& run);
void gated_delta_net(const OpArgs& a, const TaskRunner& run, DotFn dot = dot_in_order);

}  // namespace loom::cpu
