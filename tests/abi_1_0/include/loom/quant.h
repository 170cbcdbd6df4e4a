/*
 * loom/quant.h — the quantizer kind (LOOM_PLUGIN_KIND_QUANTIZER).
 *
 * A quantizer owns formats: their descriptors and reference quantize / dequantize. Backends own the
 * fast kernels that read them.
 *
 * Threading: every slot is thread-safe (a quantizer instance holds no mutable state per call).
 */
#ifndef LOOM_QUANT_H
#define LOOM_QUANT_H

#include "loom/abi.h"
#include "loom/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_quantizer loom_quantizer_t;

#define LOOM_QUANT_FORMAT_WEIGHT 1u /* usable for weights */
#define LOOM_QUANT_FORMAT_KV 2u     /* usable for the KV cache */
#define LOOM_QUANT_FORMAT_ROW 4u    /* one scale per row: block_elems is the row length */

typedef struct loom_quant_format {
  uint32_t struct_size;
  loom_dtype dtype;
  const char *name;     /* "Q4_K", static storage */
  uint32_t block_elems; /* elements per block (0 with LOOM_QUANT_FORMAT_ROW) */
  uint32_t block_bytes; /* bytes per block (per-row formats: bytes of scale metadata per row) */
  uint32_t flags;
  uint32_t reserved;
} loom_quant_format;

typedef struct loom_quantize_request {
  uint32_t struct_size;
  loom_dtype dtype;
  const float *src;        /* [n_cols, n_rows], borrowed */
  int64_t n_rows;
  int64_t n_cols;          /* a multiple of the format's block_elems */
  const float *importance; /* [n_cols] or NULL: per-column weights (activation-aware quantization) */
  void *dst;               /* caller-owned */
  uint64_t dst_size;       /* bytes available; must be >= row_size(n_cols) * n_rows */
} loom_quantize_request;

typedef struct loom_quantizer_i {
  uint32_t struct_size;
  uint32_t reserved;
  loom_status (*create)(const loom_host_services *host, const char *config_json, loom_quantizer_t **out,
                        char *error, uint32_t error_size);
  void (*destroy)(loom_quantizer_t *quantizer);
  const char *(*last_error)(loom_quantizer_t *quantizer);
  uint32_t (*format_count)(loom_quantizer_t *quantizer);
  loom_status (*format_get)(loom_quantizer_t *quantizer, uint32_t index, loom_quant_format *out);
  /* Bytes of one row of n_cols elements in `dtype`. */
  loom_status (*row_size)(loom_quantizer_t *quantizer, loom_dtype dtype, int64_t n_cols, uint64_t *out_bytes);
  /* NaN or infinite input is INVALID_ARGUMENT, never silently stored. */
  loom_status (*quantize)(loom_quantizer_t *quantizer, const loom_quantize_request *request);
  /* dst [n_cols, n_rows] f32, caller-owned. */
  loom_status (*dequantize)(loom_quantizer_t *quantizer, loom_dtype dtype, const void *src, uint64_t src_size,
                            int64_t n_rows, int64_t n_cols, float *dst);
} loom_quantizer_i;

#ifdef __cplusplus
}
#endif

#endif /* LOOM_QUANT_H */
