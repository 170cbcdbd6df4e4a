// Sizes of GGML element types: how many elements a block holds and how many bytes it takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "loom/dtype.h"

namespace loom {

struct DtypeTraits {
  std::string_view name;  // "Q4_K"
  int64_t block_elems;    // elements per block (1 for plain types)
  uint64_t block_bytes;   // bytes per block
  // Bytes added once per row. Non-zero only for Loom's per-row formats (LOOM_DTYPE_I8_ROW and
  // LOOM_DTYPE_INT8_KV: one f32 scale, then one int8 per element, so a row of n is 4 + n bytes).
  uint64_t row_overhead_bytes = 0;
};

// Traits of a type id, or nullptr when Loom does not know the type.
const DtypeTraits* dtype_traits(loom_dtype type);
// Type id by name ("Q4_K", "F16", case-insensitive), if known.
std::optional<loom_dtype> dtype_from_name(std::string_view name);
// Bytes of a row of n elements; n must be a multiple of block_elems.
// Throws loom::Error for an unknown type, a negative n, n not a multiple of the block, or overflow.
uint64_t dtype_row_bytes(loom_dtype type, int64_t n);
// Display name of a type id: the traits' name, or "type#N" when unknown.
std::string dtype_name(loom_dtype type);

}  // namespace loom
