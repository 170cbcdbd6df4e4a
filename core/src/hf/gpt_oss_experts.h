// gpt-oss's experts as published: stacked, gate and up rows interleaved in one gate_up_proj (even rows
// gate, odd rows up). OpenAI's release stores them in MXFP4: `<name>_blocks` [experts, rows,
// columns / 32, 16] (two 4-bit codes a byte, the even element in the low nibble) and `<name>_scales`
// [experts, rows, columns / 32] (E8M0 exponents). llama.cpp's converter (conversion/gpt_oss.py)
// repacks each 32-value block into ggml's MXFP4: the exponent byte, then element j in the low nibble
// and element j + 16 in the high nibble of byte j. The codes and exponents are the same numbers, so the
// repack is exact. Dequantized (BF16) releases store each matrix transposed, [experts, columns, rows].
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

// The experts of a dequantized release (BF16: gate_up_proj [experts, columns, rows], the transpose of
// a linear layer's weight, as the converter reads it): rows `which` selects, transposed, as stored.
RepackedExperts transposed_experts(const SafeTensor& t, RowSelection which, size_t element_bytes, const std::string& where);

// Every other element of the last dimension (a stacked gate_up bias: even gate, odd up), as stored.
std::vector<uint8_t> every_other_column(const SafeTensor& t, RowSelection which, size_t element_bytes);

}  // namespace loom::hf
