#include "quantize/tensor_codec.h"

#include <cstring>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "quantize/quantizer.h"

namespace loom {

namespace {

bool is_plain(loom_dtype dtype) {
  return dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_F16 || dtype == LOOM_DTYPE_BF16;
}

using LegacyDecoder = void (*)(const uint8_t*, float*, int64_t);

LegacyDecoder legacy_decoder(loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_Q4_1: return dequantize_row_q4_1;
    case LOOM_DTYPE_Q5_0: return dequantize_row_q5_0;
    case LOOM_DTYPE_Q5_1: return dequantize_row_q5_1;
    default: return nullptr;
  }
}

void check_size(loom_dtype dtype, std::span<const uint8_t> bytes, int64_t n_rows, int64_t n_cols) {
  const uint64_t expected = dtype_row_bytes(dtype, n_cols) * static_cast<uint64_t>(n_rows);
  if (bytes.size() != expected) {
    throw Error("tensor data of " + std::to_string(bytes.size()) + " bytes does not match " + std::to_string(n_rows) +
                " rows of " + std::to_string(n_cols) + " " + dtype_name(dtype) + " values (" +
                std::to_string(expected) + " bytes)");
  }
}

}  // namespace

bool can_decode(const Quantizer& quantizer, loom_dtype dtype) {
  return is_plain(dtype) || quantizer.has_format(dtype) || legacy_decoder(dtype) != nullptr;
}

bool can_encode(const Quantizer& quantizer, loom_dtype dtype, int64_t n_cols) {
  if (is_plain(dtype)) return true;
  if (!quantizer.has_format(dtype)) return false;
  return n_cols % quantizer.block_elems(dtype) == 0;
}

std::vector<float> decode_tensor(const Quantizer& quantizer, loom_dtype dtype, std::span<const uint8_t> bytes,
                                 int64_t n_rows, int64_t n_cols, int n_threads) {
  if (is_plain(dtype)) {
    check_size(dtype, bytes, n_rows, n_cols);
    return dequantize_rows(dtype, bytes, n_rows * n_cols);
  }
  if (quantizer.has_format(dtype)) return quantizer.dequantize(dtype, bytes, n_rows, n_cols, n_threads);
  if (LegacyDecoder decode = legacy_decoder(dtype)) {
    check_size(dtype, bytes, n_rows, n_cols);
    const uint64_t row = dtype_row_bytes(dtype, n_cols);
    std::vector<float> out(static_cast<size_t>(n_rows * n_cols));
    parallel_rows(n_rows, n_threads, [&](int64_t first, int64_t count) {
      for (int64_t r = first; r < first + count; ++r) {
        decode(bytes.data() + static_cast<uint64_t>(r) * row, out.data() + r * n_cols, n_cols);
      }
    });
    return out;
  }
  throw Error("cannot read tensor data of type " + dtype_name(dtype) + " (the quantizer '" + quantizer.name() +
              "' does not own it and Loom has no decoder for it)");
}

std::vector<uint8_t> encode_tensor(const Quantizer& quantizer, loom_dtype dtype, std::span<const float> values,
                                   int64_t n_rows, int64_t n_cols, std::span<const float> importance, int n_threads) {
  if (is_plain(dtype)) return quantize_rows(dtype, values, n_cols);
  return quantizer.quantize(dtype, values, n_rows, n_cols, importance, n_threads);
}

}  // namespace loom
