// LORA (ABI 1.16): run-time low-rank adapters, several in one batch. The rows are grouped by adapter
// slot, so each slot's A and B are read once per op (punica's SGMV): first A_s · x for the slot's rows
// (rank values each), then B_s's rows against those, scaled and added to dst. One implementation serves
// both layers, as the recurrent ops do: the reference runs its tasks in order with in-order dot
// products, the fast layer spreads them over the pool with its SIMD dot product.
#pragma once

#include "cpu_tensor.h"
#include "recurrent_ops.h"

namespace loom::cpu {

void lora(const OpArgs& a, const TaskRunner& run, DotFn dot = dot_in_order);

}  // namespace loom::cpu
