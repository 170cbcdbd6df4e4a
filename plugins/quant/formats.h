// The formats this quantizer owns: descriptor plus reference row quantize / dequantize.
#pragma once

#include <cstdint>

#include "loom/quant.h"

namespace loom::quant {

// Quantize one row of n elements (n a multiple of block_elems) into dst. `importance` [n] is NULL
// unless the format uses it. Returns false when a value is too large for the format's scales
// (an f16 scale would overflow); dst is then unspecified.
using QuantizeRowFn = bool (*)(const float* x, uint8_t* dst, int64_t n, const float* importance);
using DequantizeRowFn = void (*)(const uint8_t* src, float* y, int64_t n);

struct FormatInfo {
  loom_dtype dtype;
  const char* name;
  uint32_t block_elems;  // 0 for per-row formats
  uint32_t block_bytes;  // per-row formats: bytes of per-row metadata
  uint32_t flags;
  uint32_t row_elem_bytes;  // per-row formats: bytes per element after the metadata
  bool uses_importance;
  QuantizeRowFn quantize;
  DequantizeRowFn dequantize;
};

uint32_t format_count();
const FormatInfo& format_at(uint32_t index);
const FormatInfo* find_format(loom_dtype dtype);
// Bytes of one row; n_cols must be positive and (for block formats) a multiple of block_elems.
uint64_t row_bytes(const FormatInfo& format, int64_t n_cols);

// Row kernels, one file per family.
bool quantize_row_f16(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_f16(const uint8_t* src, float* y, int64_t n);
bool quantize_row_bf16(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_bf16(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q8_0(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q8_0(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q4_0(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q4_0(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q4_k(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q4_k(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q6_k(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q6_k(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q4_1(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q4_1(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q5_0(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q5_0(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q5_1(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q5_1(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q2_k(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q2_k(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q3_k(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q3_k(const uint8_t* src, float* y, int64_t n);
bool quantize_row_q5_k(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_q5_k(const uint8_t* src, float* y, int64_t n);
bool quantize_row_iq4_nl(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_iq4_nl(const uint8_t* src, float* y, int64_t n);
bool quantize_row_iq4_xs(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_iq4_xs(const uint8_t* src, float* y, int64_t n);
bool quantize_row_mxfp4(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_mxfp4(const uint8_t* src, float* y, int64_t n);
bool quantize_row_f8_e4m3_b32(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_f8_e4m3_b32(const uint8_t* src, float* y, int64_t n);
bool quantize_row_i8_row(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_i8_row(const uint8_t* src, float* y, int64_t n);
bool quantize_row_i4_g128(const float* x, uint8_t* dst, int64_t n, const float* importance);
void dequantize_row_i4_g128(const uint8_t* src, float* y, int64_t n);

}  // namespace loom::quant
