// ABI glue: request validation, the loom_quantizer_i table and the entry point. Every slot
// catches everything; no exception crosses the C ABI. The instance holds no state, and the last
// error message is per thread, so every slot is thread-safe as quant.h promises.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>

#include "formats.h"
#include "loom/loom.h"

struct loom_quantizer {
  int unused = 0;
};

namespace loom::quant {
namespace {

thread_local std::string t_last_error;

loom_status fail(loom_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

std::string dtype_text(loom_dtype dtype) { return "dtype " + std::to_string(dtype); }

// Looks up the format and checks the row length; on failure sets the message and returns NULL.
const FormatInfo* checked_format(loom_dtype dtype, int64_t n_cols, loom_status* status, const char* slot) {
  const FormatInfo* format = find_format(dtype);
  if (format == nullptr) {
    *status = fail(LOOM_STATUS_UNSUPPORTED, std::string(slot) + ": " + dtype_text(dtype) + " is not a format of this quantizer");
    return nullptr;
  }
  if (n_cols <= 0) {
    *status = fail(LOOM_STATUS_INVALID_ARGUMENT, std::string(slot) + ": n_cols must be positive, got " + std::to_string(n_cols));
    return nullptr;
  }
  if (format->block_elems > 1 && n_cols % format->block_elems != 0) {
    *status = fail(LOOM_STATUS_INVALID_ARGUMENT, std::string(slot) + ": n_cols " + std::to_string(n_cols) + " is not a multiple of " +
                                                     format->name + "'s block of " + std::to_string(format->block_elems) +
                                                     " elements");
    return nullptr;
  }
  return format;
}

// rows * row_bytes, or false when it does not fit in 64 bits.
bool total_bytes(uint64_t row, int64_t n_rows, uint64_t* out) {
  if (n_rows < 0) return false;
  if (row != 0 && static_cast<uint64_t>(n_rows) > UINT64_MAX / row) return false;
  *out = row * static_cast<uint64_t>(n_rows);
  return true;
}

loom_status q_create(const loom_host_services*, const char* config_json, loom_quantizer_t** out, char* error,
                     uint32_t error_size) {
  auto write_error = [&](const std::string& message) {
    if (error == nullptr || error_size == 0) return;
    const size_t n = std::min<size_t>(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  };
  if (out == nullptr) {
    write_error("quantizer create: out is NULL");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  std::string config = config_json ? config_json : "";
  config.erase(std::remove_if(config.begin(), config.end(), [](unsigned char c) { return std::isspace(c); }), config.end());
  if (!config.empty() && config != "{}") {
    write_error("quantizer config: this quantizer takes no options, expected {} but got " + std::string(config_json));
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  try {
    *out = new loom_quantizer{};
    return LOOM_STATUS_OK;
  } catch (...) {
    write_error("quantizer create: allocation failed");
    return LOOM_STATUS_OUT_OF_MEMORY;
  }
}

void q_destroy(loom_quantizer_t* quantizer) { delete quantizer; }

const char* q_last_error(loom_quantizer_t*) { return t_last_error.c_str(); }

uint32_t q_format_count(loom_quantizer_t*) { return format_count(); }

loom_status q_format_get(loom_quantizer_t*, uint32_t index, loom_quant_format* out) {
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "format_get: out is NULL or its struct_size is too small");
  }
  if (index >= format_count()) {
    return fail(LOOM_STATUS_OUT_OF_RANGE, "format_get: index " + std::to_string(index) + " >= format_count " +
                                              std::to_string(format_count()));
  }
  const FormatInfo& f = format_at(index);
  loom_quant_format desc{};
  desc.struct_size = sizeof(desc);
  desc.dtype = f.dtype;
  desc.name = f.name;
  desc.block_elems = f.block_elems;
  desc.block_bytes = f.block_bytes;
  desc.flags = f.flags;
  const uint32_t n = std::min<uint32_t>(out->struct_size, sizeof(desc));
  std::memcpy(out, &desc, n);
  out->struct_size = n;
  return LOOM_STATUS_OK;
}

loom_status q_row_size(loom_quantizer_t*, loom_dtype dtype, int64_t n_cols, uint64_t* out_bytes) {
  try {
    if (out_bytes == nullptr) return fail(LOOM_STATUS_INVALID_ARGUMENT, "row_size: out_bytes is NULL");
    loom_status status = LOOM_STATUS_OK;
    const FormatInfo* format = checked_format(dtype, n_cols, &status, "row_size");
    if (format == nullptr) return status;
    *out_bytes = row_bytes(*format, n_cols);
    return LOOM_STATUS_OK;
  } catch (...) {
    return fail(LOOM_STATUS_INTERNAL, "row_size: internal error");
  }
}

loom_status quantize_checked(const loom_quantize_request* r) {
  if (r == nullptr || !LOOM_HAS_MEMBER(r, loom_quantize_request, dst_size)) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "quantize: request is NULL or its struct_size is too small");
  }
  loom_status status = LOOM_STATUS_OK;
  const FormatInfo* format = checked_format(r->dtype, r->n_cols, &status, "quantize");
  if (format == nullptr) return status;
  if (r->n_rows < 0) return fail(LOOM_STATUS_INVALID_ARGUMENT, "quantize: n_rows is negative");
  if (r->n_rows == 0) return LOOM_STATUS_OK;
  if (r->src == nullptr || r->dst == nullptr) return fail(LOOM_STATUS_INVALID_ARGUMENT, "quantize: src or dst is NULL");
  const uint64_t row = row_bytes(*format, r->n_cols);
  uint64_t needed = 0;
  if (!total_bytes(row, r->n_rows, &needed) || r->dst_size < needed) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "quantize: dst_size " + std::to_string(r->dst_size) + " is too small for " +
                                                  std::to_string(r->n_rows) + " rows of " + std::to_string(row) + " bytes (" +
                                                  format->name + ")");
  }
  if (r->importance != nullptr) {
    if (!format->uses_importance) {
      return fail(LOOM_STATUS_UNSUPPORTED, std::string("quantize: ") + format->name +
                                               " does not use importance (activation-aware quantization is I4_G128)");
    }
    for (int64_t c = 0; c < r->n_cols; ++c) {
      if (!std::isfinite(r->importance[c]) || r->importance[c] < 0) {
        return fail(LOOM_STATUS_INVALID_ARGUMENT, "quantize: importance[" + std::to_string(c) +
                                                      "] must be finite and >= 0, got " + std::to_string(r->importance[c]));
      }
    }
  }
  const int64_t n_cols = r->n_cols;
  for (int64_t i = 0; i < r->n_rows; ++i) {
    for (int64_t c = 0; c < n_cols; ++c) {
      const float v = r->src[i * n_cols + c];
      if (!std::isfinite(v)) {
        return fail(LOOM_STATUS_INVALID_ARGUMENT, "quantize: src[row " + std::to_string(i) + ", col " + std::to_string(c) +
                                                      "] is " + (std::isnan(v) ? "NaN" : "infinite") +
                                                      "; non-finite values cannot be quantized");
      }
    }
  }
  uint8_t* dst = static_cast<uint8_t*>(r->dst);
  for (int64_t i = 0; i < r->n_rows; ++i) {
    if (!format->quantize(r->src + i * n_cols, dst + static_cast<uint64_t>(i) * row, n_cols, r->importance)) {
      return fail(LOOM_STATUS_OUT_OF_RANGE, "quantize: row " + std::to_string(i) + " has values too large for " +
                                                format->name + "'s f16 scales (|x| up to about 65504 times the step)");
    }
  }
  return LOOM_STATUS_OK;
}

loom_status q_quantize(loom_quantizer_t*, const loom_quantize_request* request) {
  try {
    return quantize_checked(request);
  } catch (const std::exception& e) {
    return fail(LOOM_STATUS_INTERNAL, std::string("quantize: internal error: ") + e.what());
  } catch (...) {
    return fail(LOOM_STATUS_INTERNAL, "quantize: internal error");
  }
}

loom_status q_dequantize(loom_quantizer_t*, loom_dtype dtype, const void* src, uint64_t src_size, int64_t n_rows,
                         int64_t n_cols, float* dst) {
  try {
    loom_status status = LOOM_STATUS_OK;
    const FormatInfo* format = checked_format(dtype, n_cols, &status, "dequantize");
    if (format == nullptr) return status;
    if (n_rows < 0) return fail(LOOM_STATUS_INVALID_ARGUMENT, "dequantize: n_rows is negative");
    if (n_rows == 0) return LOOM_STATUS_OK;
    if (src == nullptr || dst == nullptr) return fail(LOOM_STATUS_INVALID_ARGUMENT, "dequantize: src or dst is NULL");
    const uint64_t row = row_bytes(*format, n_cols);
    uint64_t needed = 0;
    if (!total_bytes(row, n_rows, &needed) || src_size < needed) {
      return fail(LOOM_STATUS_INVALID_ARGUMENT, "dequantize: src_size " + std::to_string(src_size) + " is too small for " +
                                                    std::to_string(n_rows) + " rows of " + std::to_string(row) + " bytes (" +
                                                    format->name + ")");
    }
    const uint8_t* bytes = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n_rows; ++i) format->dequantize(bytes + static_cast<uint64_t>(i) * row, dst + i * n_cols, n_cols);
    return LOOM_STATUS_OK;
  } catch (...) {
    return fail(LOOM_STATUS_INTERNAL, "dequantize: internal error");
  }
}

const loom_quantizer_i kTable = {
    sizeof(loom_quantizer_i), 0, q_create, q_destroy, q_last_error, q_format_count, q_format_get, q_row_size,
    q_quantize,               q_dequantize,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc),
    LOOM_ABI_MAJOR,
    LOOM_ABI_MINOR,
    LOOM_PLUGIN_KIND_QUANTIZER,
    "quant",
    "0.1.0",
    "Reference quantizer: F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K (GGML bit-exact), I8_ROW, INT8_KV, I4_G128 (activation-aware)",
    &kTable,
};

}  // namespace
}  // namespace loom::quant

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::quant::kDesc;
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
