// Entry points of the fast layer's per-op files.
#pragma once

#include "cpu_tensor.h"
#include "kernels.h"
#include "thread_pool.h"

namespace loom::cpu {

void fast_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k);
// Decode matmuls that read the same activation row, run in one pass over the pool (fast_matmul.cpp).
// joins_decode_group: whether `next` may join `members` (the first must itself be a decode matmul
// whose output does not overlap its activation).
bool joins_decode_group(const OpArgs* const* members, int n_members, const OpArgs& next);
void fast_matmul_decode_group(const OpArgs* const* ops, int n_ops, ThreadPool& pool, const Kernels& k);
// Whether two tensor views touch common bytes, and whether they are the same view (fast_matmul.cpp).
bool overlap(const Tensor& a, const Tensor& b);
bool same_view(const Tensor& a, const Tensor& b);
// Two or more activation rows (fast_matmul_batched.cpp). Several independent matmuls run in two
// passes over the pool together; none may write what another reads.
void fast_matmul_batched(const OpArgs* const* ops, int n_ops, ThreadPool& pool, const Kernels& k);
void fast_store_kv(const OpArgs& a, ThreadPool& pool, const Kernels& k);
void fast_paged_attention(const OpArgs& a, ThreadPool& pool, const Kernels& k);
// ATTENTION (ABI 1.9) through the same tiled pass as prefill (fast_attention.cpp).
void fast_encoder_attention(const OpArgs& a, ThreadPool& pool, const Kernels& k);

// Splits [0, n) into chunks of at least `min_chunk` so every thread gets several (dynamic balance).
inline int64_t chunk_size(int64_t n, int n_threads, int64_t min_chunk) {
  const int64_t target = (n + 4 * n_threads - 1) / (4 * n_threads);
  return target < min_chunk ? min_chunk : target;
}

}  // namespace loom::cpu
