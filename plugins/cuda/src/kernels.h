// Host-side launchers of the kernels (defined in the .cu files, called from op_dispatch.cpp).
// Each enqueues work on ctx.stream and returns; launch failures throw OpError.
#pragma once

#include "cuda_types.h"

namespace loom::cuda {

// k_rowops.cu
void launch_get_rows(const OpArgs& a, const LaunchContext& ctx);
void launch_binary(const OpArgs& a, const LaunchContext& ctx);  // ADD, MUL
void launch_scale(const OpArgs& a, const LaunchContext& ctx);
void launch_rms_norm(const OpArgs& a, const LaunchContext& ctx);
void launch_rope(const OpArgs& a, const LaunchContext& ctx);
void launch_glu(const OpArgs& a, const LaunchContext& ctx);  // GLU and UNARY
void launch_copy(const OpArgs& a, const LaunchContext& ctx);
void launch_softmax(const OpArgs& a, const LaunchContext& ctx);
void launch_store_kv(const OpArgs& a, const LaunchContext& ctx);

// k_matmul.cu
uint64_t matmul_scratch_bytes(const OpArgs& a, const LaunchContext& ctx);
void launch_matmul(const OpArgs& a, const LaunchContext& ctx);

// k_lora.cu
void launch_lora(const OpArgs& a, const LaunchContext& ctx);
inline constexpr int64_t kMaxLoraRank = 4096;  // the rank products sit in shared memory

// k_attention.cu
uint64_t attention_scratch_bytes(const OpArgs& a);
void launch_paged_attention(const OpArgs& a, const LaunchContext& ctx);
inline constexpr int64_t kMaxHeadDim = 256;
inline constexpr int64_t kMaxGroup = 16;  // query heads per KV head in the decode kernel

}  // namespace loom::cuda
