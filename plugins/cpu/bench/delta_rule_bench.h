// loom_cpu_kernel_bench's delta-rule section (delta_rule_bench.cpp).
#pragma once

#include "loom/loom.h"

namespace loom::bench {

// GATED_DELTA_NET over one sequence of n tokens (Qwen3-Next's layer: 16 key heads, 32 value heads
// of 128) run as one op, against the same tokens run one op per token (token by token, as a
// backend without the chunked form would): microseconds per token and the speed-up, per n.
void bench_delta_rule(const loom_backend_i* api, loom_backend_t* be);

}  // namespace loom::bench
