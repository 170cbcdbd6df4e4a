// Reference (scalar) conversions to and from GGML's storage formats, bit-exact with ggml's
// *_ref functions: used to write synthetic models and to check quantizers against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/dtype.h"

namespace loom {

// IEEE half and bfloat16, round-to-nearest-even (what F16C and ggml's converters do).
uint16_t f32_to_f16(float value);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float bf16_to_f32(uint16_t bits);

// Encode `values` (a whole number of rows of `row_length`) as F32, F16, BF16, Q8_0 or Q4_0.
// Throws loom::Error for another type or a row length that is not a multiple of the block.
std::vector<uint8_t> quantize_rows(loom_dtype type, std::span<const float> values, int64_t row_length);
// The inverse, for the same types.
std::vector<float> dequantize_rows(loom_dtype type, std::span<const uint8_t> bytes, int64_t n_values);

// One block each (32 values in, one block out), as ggml's quantize_row_q8_0_ref / q4_0_ref.
void quantize_block_q8_0(const float* x, loom_block_q8_0* out);
void quantize_block_q4_0(const float* x, loom_block_q4_0* out);

}  // namespace loom
