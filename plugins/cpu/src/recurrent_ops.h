// Recurrent ops (ABI 1.6): the short causal convolution and the gated delta rule of Gated DeltaNet
// layers, each over per-sequence state slots. One implementation serves both layers: the reference
// runs every task in order with plain in-order dot products, the fast layer spreads the tasks over
// the pool (sequences x heads for the delta rule, channel ranges for the convolution) and takes its
// kernel table's SIMD dot product, so the two differ only in summation order. The fast layer also
// gives the delta rule its float_dots and axpy, and then runs it in chunks (delta_rule_chunked.h):
// the same rule, summed in another order.
#pragma once

#include <cstdint>
#include <functional>

#include "cpu_tensor.h"
#include "delta_rule_chunked.h"

namespace loom::cpu {

// Runs fn(task) for task in [0, n_tasks); the reference passes a plain loop, the fast layer its pool.
using TaskRunner = std::function<void(int64_t n_tasks, const std::function<void(int64_t)>& fn)>;

using DotFn = float (*)(const float* a, const float* b, int64_t n);
float dot_in_order(const float* a, const float* b, int64_t n);

void ssm_conv(const OpArgs& a, const TaskRunner& run);
// The delta rule's kernels: the reference keeps the defaults, so it walks every sequence token by
// token with in-order dot products.
struct DeltaRuleKernels {
  DotFn dot = dot_in_order;
  DeltaChunkKernels chunk;  // the reference leaves them null
};
// Where the chunk kernels are given, a sequence this long or longer runs in chunks and a shorter
// one token by token as chunks of one (delta_rule_token). Measured with loom_cpu_kernel_bench
// delta against chunks of one: 4 tokens in one chunk 0.87x, 8 1.27x, 16 2.0x.
inline constexpr int64_t kMinChunkedTokens = 8;
void gated_delta_net(const OpArgs& a, const TaskRunner& run, const DeltaRuleKernels& kernels = {});

}  // namespace loom::cpu
