#include <iterator>

#include "formats.h"
#include "ggml_blocks.h"

namespace loom::quant {

namespace {
constexpr uint32_t kWeight = LOOM_QUANT_FORMAT_WEIGHT;
constexpr uint32_t kKv = LOOM_QUANT_FORMAT_KV;
constexpr uint32_t kRow = LOOM_QUANT_FORMAT_ROW;

const FormatInfo kFormats[] = {
    {LOOM_DTYPE_F16, "F16", 1, 2, kWeight | kKv, 0, false, quantize_row_f16, dequantize_row_f16},
    {LOOM_DTYPE_BF16, "BF16", 1, 2, kWeight, 0, false, quantize_row_bf16, dequantize_row_bf16},
    {LOOM_DTYPE_Q8_0, "Q8_0", LOOM_QK8_0, sizeof(loom_block_q8_0), kWeight | kKv, 0, false, quantize_row_q8_0,
     dequantize_row_q8_0},
    {LOOM_DTYPE_Q4_0, "Q4_0", LOOM_QK4_0, sizeof(loom_block_q4_0), kWeight, 0, false, quantize_row_q4_0,
     dequantize_row_q4_0},
    {LOOM_DTYPE_Q4_K, "Q4_K", LOOM_QK_K, sizeof(loom_block_q4_k), kWeight, 0, false, quantize_row_q4_k,
     dequantize_row_q4_k},
    {LOOM_DTYPE_Q6_K, "Q6_K", LOOM_QK_K, sizeof(loom_block_q6_k), kWeight, 0, false, quantize_row_q6_k,
     dequantize_row_q6_k},
    {LOOM_DTYPE_Q4_1, "Q4_1", 32, sizeof(BlockQ4_1), kWeight, 0, false, quantize_row_q4_1, dequantize_row_q4_1},
    {LOOM_DTYPE_Q5_0, "Q5_0", LOOM_QK5_0, sizeof(loom_block_q5_0), kWeight, 0, false, quantize_row_q5_0,
     dequantize_row_q5_0},
    {LOOM_DTYPE_Q5_1, "Q5_1", 32, sizeof(BlockQ5_1), kWeight, 0, false, quantize_row_q5_1, dequantize_row_q5_1},
    {LOOM_DTYPE_Q2_K, "Q2_K", LOOM_QK_K, sizeof(BlockQ2_K), kWeight, 0, false, quantize_row_q2_k, dequantize_row_q2_k},
    {LOOM_DTYPE_Q3_K, "Q3_K", LOOM_QK_K, sizeof(BlockQ3_K), kWeight, 0, false, quantize_row_q3_k, dequantize_row_q3_k},
    {LOOM_DTYPE_Q5_K, "Q5_K", LOOM_QK_K, sizeof(BlockQ5_K), kWeight, 0, false, quantize_row_q5_k, dequantize_row_q5_k},
    {LOOM_DTYPE_IQ4_NL, "IQ4_NL", 32, sizeof(BlockIQ4_NL), kWeight, 0, false, quantize_row_iq4_nl, dequantize_row_iq4_nl},
    {LOOM_DTYPE_IQ4_XS, "IQ4_XS", LOOM_QK_K, sizeof(BlockIQ4_XS), kWeight, 0, false, quantize_row_iq4_xs,
     dequantize_row_iq4_xs},
    {LOOM_DTYPE_MXFP4, "MXFP4", LOOM_QK_MXFP4, sizeof(loom_block_mxfp4), kWeight, 0, false, quantize_row_mxfp4,
     dequantize_row_mxfp4},
    {LOOM_DTYPE_F8_E4M3_B32, "F8_E4M3_B32", LOOM_QK_F8_E4M3_B32, sizeof(loom_block_f8_e4m3_b32), kWeight, 0, false,
     quantize_row_f8_e4m3_b32, dequantize_row_f8_e4m3_b32},
    {LOOM_DTYPE_I8_ROW, "I8_ROW", 0, sizeof(float), kWeight | kRow, 1, false, quantize_row_i8_row,
     dequantize_row_i8_row},
    {LOOM_DTYPE_INT8_KV, "INT8_KV", 0, sizeof(float), kKv | kRow, 1, false, quantize_row_i8_row,
     dequantize_row_i8_row},
    {LOOM_DTYPE_I4_G128, "I4_G128", 128, sizeof(loom_block_i4_g128), kWeight, 0, true, quantize_row_i4_g128,
     dequantize_row_i4_g128},
};

static_assert(sizeof(loom_block_q8_0) == 34 && sizeof(loom_block_q4_0) == 18, "GGML block sizes");
static_assert(sizeof(loom_block_q4_k) == 144 && sizeof(loom_block_q6_k) == 210, "GGML K-quant block sizes");
static_assert(sizeof(loom_block_i4_g128) == 68, "I4_G128 block size");
static_assert(sizeof(loom_block_f8_e4m3_b32) == 36, "F8_E4M3_B32 block size");
}  // namespace

uint32_t format_count() { return static_cast<uint32_t>(std::size(kFormats)); }
const FormatInfo& format_at(uint32_t index) { return kFormats[index]; }

const FormatInfo* find_format(loom_dtype dtype) {
  for (const FormatInfo& f : kFormats) {
    if (f.dtype == dtype) return &f;
  }
  return nullptr;
}

uint64_t row_bytes(const FormatInfo& format, int64_t n_cols) {
  const uint64_t n = static_cast<uint64_t>(n_cols);
  if (format.flags & LOOM_QUANT_FORMAT_ROW) return format.block_bytes + n * format.row_elem_bytes;
  return n / format.block_elems * format.block_bytes;
}

}  // namespace loom::quant
