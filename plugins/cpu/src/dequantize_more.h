// Reference decoding of the GGUF block formats the CPU backend reads without a tuned kernel of its
// own: Q4_1, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS, each exactly as ggml lays it out, MXFP4, and
// the FP8 checkpoints' blocks (LOOM_DTYPE_F8_E4M3_B32). The fast
// layer multiplies them by decoding a weight row at a time (kernels_dequant.cpp).
#pragma once

#include <cstdint>

#include "loom/dtype.h"

namespace loom::cpu {

// Bytes of one block and values it holds; {0, 0} for a type not decoded here.
struct ExtraLayout {
  int64_t block_elems;
  uint64_t block_bytes;
};
ExtraLayout extra_layout(loom_dtype type);

// Decode n values (a multiple of the block size) of `type`; false for a type not decoded here.
bool dequantize_extra(loom_dtype type, const void* row, float* out, int64_t n);

}  // namespace loom::cpu
