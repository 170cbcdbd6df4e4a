// Tensor data <-> f32 for `loom quantize`: F32/F16/BF16 directly, the quantizer plugin's formats
// through the plugin, and GGML's Q4_1/Q5_0/Q5_1 (which llama.cpp's Q4_K_M files contain but no Loom
// quantizer writes) through the reference decoders in ggml_legacy_decode.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/dtype.h"

namespace loom {

class Quantizer;

// True when decode_tensor can read `dtype`.
bool can_decode(const Quantizer& quantizer, loom_dtype dtype);
// True when encode_tensor can write `dtype` with rows of n_cols (block size permitting).
bool can_encode(const Quantizer& quantizer, loom_dtype dtype, int64_t n_cols);

// [n_cols, n_rows] values of a tensor stored as `dtype`. loom::Error for a type Loom cannot decode.
std::vector<float> decode_tensor(const Quantizer& quantizer, loom_dtype dtype, std::span<const uint8_t> bytes,
                                 int64_t n_rows, int64_t n_cols, int n_threads);
// The inverse. importance [n_cols] or empty (only I4_G128 uses it).
std::vector<uint8_t> encode_tensor(const Quantizer& quantizer, loom_dtype dtype, std::span<const float> values,
                                   int64_t n_rows, int64_t n_cols, std::span<const float> importance, int n_threads);

// GGML reference decoders of the legacy formats (bit-exact with dequantize_row_q4_1/q5_0/q5_1).
// n must be a multiple of 32; `src` must hold n / 32 blocks.
void dequantize_row_q4_1(const uint8_t* src, float* dst, int64_t n);
void dequantize_row_q5_0(const uint8_t* src, float* dst, int64_t n);
void dequantize_row_q5_1(const uint8_t* src, float* dst, int64_t n);

}  // namespace loom
