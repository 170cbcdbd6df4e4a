/*
 * example_q8 — a complete Loom quantizer plugin in plain C: one format, GGML's Q8_0 (blocks of 32
 * values as an f16 scale and 32 int8), bit-exact with llama.cpp's reference quantize_row_q8_0.
 *
 * It shows the whole contract a third party follows: one exported entry point that negotiates the
 * ABI, a static descriptor and function table, create/destroy pairs, status codes with messages,
 * and no frees across the boundary.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/quant.h"

struct loom_quantizer {
  char last_error[256];
};

static void set_error(loom_quantizer_t *q, const char *message) { snprintf(q->last_error, sizeof(q->last_error), "%s", message); }

/* ---- f16 <-> f32 (IEEE binary16, round to nearest even) ---- */
static uint16_t f32_to_f16(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exponent = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf (never for finite Q8_0 scales) */
  if (exponent <= 0) {                                   /* subnormal or zero */
    if (exponent < -10) return (uint16_t)sign;
    mantissa |= 0x800000u;
    const uint32_t shift = (uint32_t)(14 - exponent);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half; /* may carry into the exponent: correct */
  return (uint16_t)half;
}

static float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  float value;
  if (exponent == 0) {
    value = ldexpf((float)mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = ldexpf((float)(mantissa | 0x400u), (int)exponent - 25);
  }
  return sign ? -value : value;
}

/* ---- the slots ---- */
static loom_status q8_create(const loom_host_services *host, const char *config_json, loom_quantizer_t **out,
                             char *error, uint32_t error_size) {
  (void)host;
  /* This plugin takes no options: accept an empty JSON object only. */
  const char *p = config_json ? config_json : "";
  while (*p == ' ' || *p == '\n' || *p == '\t') ++p;
  int ok = *p == '{';
  if (ok) {
    ++p;
    while (*p == ' ' || *p == '\n' || *p == '\t') ++p;
    ok = *p == '}';
  }
  if (!ok) {
    if (error && error_size) snprintf(error, error_size, "example_q8 takes no options: config must be {}");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = (loom_quantizer_t *)calloc(1, sizeof(loom_quantizer_t));
  if (*out == NULL) {
    if (error && error_size) snprintf(error, error_size, "out of memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  }
  return LOOM_STATUS_OK;
}

static void q8_destroy(loom_quantizer_t *q) { free(q); }
static const char *q8_last_error(loom_quantizer_t *q) { return q->last_error; }
static uint32_t q8_format_count(loom_quantizer_t *q) {
  (void)q;
  return 1;
}

static loom_status q8_format_get(loom_quantizer_t *q, uint32_t index, loom_quant_format *out) {
  if (index != 0 || out == NULL || out->struct_size < sizeof(loom_quant_format)) {
    set_error(q, "format index out of range or output struct too small");
    return LOOM_STATUS_OUT_OF_RANGE;
  }
  out->dtype = LOOM_DTYPE_Q8_0;
  out->name = "Q8_0";
  out->block_elems = LOOM_QK8_0;
  out->block_bytes = sizeof(loom_block_q8_0);
  out->flags = LOOM_QUANT_FORMAT_WEIGHT;
  return LOOM_STATUS_OK;
}

static loom_status check_shape(loom_quantizer_t *q, loom_dtype dtype, int64_t n_rows, int64_t n_cols) {
  if (dtype != LOOM_DTYPE_Q8_0) {
    set_error(q, "example_q8 only knows Q8_0");
    return LOOM_STATUS_UNSUPPORTED;
  }
  if (n_rows < 0 || n_cols <= 0 || n_cols % LOOM_QK8_0 != 0) {
    set_error(q, "n_cols must be a positive multiple of 32 for Q8_0 and n_rows must be >= 0");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  return LOOM_STATUS_OK;
}

static loom_status q8_row_size(loom_quantizer_t *q, loom_dtype dtype, int64_t n_cols, uint64_t *out) {
  loom_status status = check_shape(q, dtype, 1, n_cols);
  if (status == LOOM_STATUS_OK) *out = (uint64_t)(n_cols / LOOM_QK8_0) * sizeof(loom_block_q8_0);
  return status;
}

static loom_status q8_quantize(loom_quantizer_t *q, const loom_quantize_request *r) {
  loom_status status = check_shape(q, r->dtype, r->n_rows, r->n_cols);
  if (status != LOOM_STATUS_OK) return status;
  const uint64_t n = (uint64_t)r->n_rows * (uint64_t)r->n_cols;
  if (r->dst_size < n / LOOM_QK8_0 * sizeof(loom_block_q8_0)) {
    set_error(q, "dst_size is smaller than n_rows * row_size");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (!isfinite(r->src[i])) {
      set_error(q, "input holds a NaN or infinite value");
      return LOOM_STATUS_INVALID_ARGUMENT;
    }
  }
  loom_block_q8_0 *blocks = (loom_block_q8_0 *)r->dst;
  for (uint64_t b = 0; b < n / LOOM_QK8_0; ++b) {
    const float *x = r->src + b * LOOM_QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < LOOM_QK8_0; ++j) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = f32_to_f16(d);
    for (int j = 0; j < LOOM_QK8_0; ++j) blocks[b].qs[j] = (int8_t)roundf(x[j] * id);
  }
  return LOOM_STATUS_OK;
}

static loom_status q8_dequantize(loom_quantizer_t *q, loom_dtype dtype, const void *src, uint64_t src_size,
                                 int64_t n_rows, int64_t n_cols, float *dst) {
  loom_status status = check_shape(q, dtype, n_rows, n_cols);
  if (status != LOOM_STATUS_OK) return status;
  const uint64_t n_blocks = (uint64_t)n_rows * (uint64_t)n_cols / LOOM_QK8_0;
  if (src_size < n_blocks * sizeof(loom_block_q8_0)) {
    set_error(q, "src_size is smaller than n_rows * row_size");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  const loom_block_q8_0 *blocks = (const loom_block_q8_0 *)src;
  for (uint64_t b = 0; b < n_blocks; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    for (int j = 0; j < LOOM_QK8_0; ++j) dst[b * LOOM_QK8_0 + j] = d * (float)blocks[b].qs[j];
  }
  return LOOM_STATUS_OK;
}

static const loom_quantizer_i q8_table = {sizeof(loom_quantizer_i), 0,         q8_create,     q8_destroy,
                                          q8_last_error,            q8_format_count, q8_format_get, q8_row_size,
                                          q8_quantize,              q8_dequantize};

static const loom_plugin_desc q8_desc = {sizeof(loom_plugin_desc), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                         LOOM_PLUGIN_KIND_QUANTIZER, "example_q8", "0.1.0",
                                         "example: Q8_0 weight quantizer written in C against the installed SDK",
                                         &q8_table};

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version *host, const loom_plugin_desc **out) {
  *out = &q8_desc;
  /* Same major: compatible. A newer minor host only appended members we do not read. */
  if (host == NULL || host->struct_size < sizeof(loom_host_version) || host->abi_major != LOOM_ABI_MAJOR) {
    return LOOM_STATUS_VERSION_MISMATCH;
  }
  return LOOM_STATUS_OK;
}
