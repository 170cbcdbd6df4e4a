// run_ops for one stream: validate every op first (nothing is enqueued for a list with a bad op),
// size the scratch arena, then launch the kernels eagerly or through a captured CUDA graph.
#pragma once

#include "cuda_stream.h"

namespace loom::cuda {

struct DispatchConfig {
  int sm_count = 1;
  int64_t gemm_min_tokens = 64;
};

// Throws OpError naming the failing op ("op 3: MATMUL: ...").
void run_op_list(StreamState& stream, const loom_op* ops, uint32_t n_ops, const DispatchConfig& config);

}  // namespace loom::cuda
