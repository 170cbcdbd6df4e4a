// Mixture-of-experts ops (ABI 1.5): routing and the weighted sum are small and shared by both
// layers, so the reference and the fast layer choose the same experts to the bit; the expert
// matmul has a plain reference and a fast version that groups the batch's rows by expert.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_tensor.h"

namespace loom::cpu {

class ThreadPool;
struct Kernels;

// MOE_ROUTE for tokens [t0, t1): ids (src1) and weights (dst) of each token's chosen experts.
void moe_route_rows(const OpArgs& a, int64_t t0, int64_t t1);
// MOE_SUM for tokens [t0, t1).
void moe_sum_rows(const OpArgs& a, int64_t t0, int64_t t1);

void reference_moe_matmul(const OpArgs& a);

// The (token, slot) pairs of a MOE_MATMUL, grouped by expert: rows[first[e] .. first[e + 1]) use
// expert e, each as token * n_used + slot. Ids are checked against n_expert here.
struct ExpertGroups {
  std::vector<int64_t> first;  // [n_expert + 1]
  std::vector<int64_t> rows;
};
ExpertGroups group_rows_by_expert(const OpArgs& a);

// Expert matrices read by the fast MOE_MATMUL since the backend was created, and the (token,
// expert) rows they served: rows / reads is how many tokens share each read of an expert.
struct MoeCounters {
  uint64_t ops = 0;
  uint64_t expert_reads = 0;
  uint64_t rows = 0;
};

void fast_moe_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k, MoeCounters& counters);
// Consecutive MOE_MATMULs that read the same activations with the same routing (a layer's gate and
// up) and do not write what another reads or writes: one pass over the pool for all their experts.
bool joins_moe_group(const OpArgs& first, const OpArgs& next);
void fast_moe_matmul_group(const OpArgs* const* ops, int n_ops, ThreadPool& pool, const Kernels& k, MoeCounters& counters);

}  // namespace loom::cpu
