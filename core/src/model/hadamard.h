// Hadamard rotations for quantized KV caches. A block format (Q8_0, Q4_0) or a row scale (INT8_KV)
// loses most where a few channels of a key or value are far larger than the rest: one outlier sets
// the scale of its whole block. Multiplying queries and keys by the same orthonormal Hadamard matrix
// leaves every score q·k unchanged and spreads each outlier over the block, so the rounding error
// falls; values are rotated the same way and the attention output rotated back (H·H = I). llama.cpp
// does the same when its cache is quantized (keys by the largest power of two dividing the head
// size, values by 64).
#pragma once

#include <cstdint>
#include <vector>

#include "loom/dtype.h"

namespace loom {

// The cache types whose keys and values are stored rotated: the quantized ones (Q8_0, Q4_0, INT8_KV).
bool kv_dtype_rotates(loom_dtype dtype);

// The n x n Sylvester-Hadamard matrix scaled by 1 / sqrt(n), row-major (symmetric, so also
// column-major); n a power of two.
std::vector<float> hadamard_matrix(int64_t n);

// The rotation sizes for one head size: keys (and queries) and values; 0 when the head size is not
// a multiple of 64 (no rotation).
int64_t key_rotation_size(int64_t head_dim);
int64_t value_rotation_size(int64_t head_dim);

}  // namespace loom
