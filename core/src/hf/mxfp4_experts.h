// gpt-oss's experts as OpenAI published them: MXFP4 values in `<name>_blocks` [experts, rows,
// columns / 32, 16] (two 4-bit codes a byte, the even element in the low nibble) and `<name>_scales`
// [experts, rows, columns / 32] (E8M0 exponents). llama.cpp's converter (conversion/gpt_oss.py)
// repacks each 32-value block into ggml's MXFP4: the exponent byte, then element j in the low nibble
// and element j + 16 in the high nibble of byte j. The codes and exponents are the same numbers, so the
// repack is exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hf/safetensors_file.h"

namespace loom::hf {

enum class RowSelection { all, even, odd };  // gate_up_proj: even rows gate, odd rows up

struct RepackedExperts {
  std::vector<int64_t> dims;  // GGUF order: [columns, rows, experts]
  std::vector<uint8_t> bytes;
};

// The experts' rows `which` selects, as ggml MXFP4 blocks; loom::Error naming the tensor for a shape
// or dtype that is not the published one.
RepackedExperts repack_mxfp4_experts(const SafeTensor& blocks, const SafeTensor& scales, RowSelection which, const std::string& where);

// Every other element of the last dimension (a stacked gate_up bias: even gate, odd up), as stored.
std::vector<uint8_t> every_other_column(const SafeTensor& t, RowSelection which, size_t element_bytes);

}  // namespace loom::hf
