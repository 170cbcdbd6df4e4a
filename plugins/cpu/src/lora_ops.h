// LORA (ABI 1.16): run-time low-rank adapters, several in one batch. The rows are grouped by adapter
// slot, so each slot's A and B are read once per op (punica's SGMV): first A_s · x for the slot's rows
// (rank values each), then B_s's columns (rows of the transposed B) added along the outputs, scaled.
// One implementation serves both layers, as the recurrent ops do: the reference runs its tasks in order
// with in-order dot products and axpys, the fast layer spreads them over the pool with its SIMD kernels.
#pragma once

#include "cpu_tensor.h"
#include "encoder_ops.h"
#include "recurrent_ops.h"

namespace loom::cpu {

void axpy_f16_in_order(float a, const uint16_t* x, float* y, int64_t n);  // y += a * x

struct LoraKernels {
  DotFn dot = dot_in_order;
  void (*axpy)(float a, const float* x, float* y, int64_t n) = axpy_in_order;
  void (*axpy_f16)(float a, const uint16_t* x, float* y, int64_t n) = axpy_f16_in_order;
};

void lora(const OpArgs& a, const TaskRunner& run, const LoraKernels& kernels = {});

}  // namespace loom::cpu
