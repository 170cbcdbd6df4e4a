/*
 * loom/dtype.h — element types and quantized block layouts.
 *
 * Type ids are GGML's (the numbers stored in GGUF files), so a tensor read from a GGUF file is handed
 * to a backend without translation. Block layouts are bit-exact with GGML's, so files interoperate
 * with llama.cpp.
 */
#ifndef LOOM_DTYPE_H
#define LOOM_DTYPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t loom_dtype;
#define LOOM_DTYPE_F32 0
#define LOOM_DTYPE_F16 1
#define LOOM_DTYPE_Q4_0 2
#define LOOM_DTYPE_Q4_1 3
#define LOOM_DTYPE_Q5_0 6
#define LOOM_DTYPE_Q5_1 7
#define LOOM_DTYPE_Q8_0 8
#define LOOM_DTYPE_Q8_1 9
#define LOOM_DTYPE_Q2_K 10
#define LOOM_DTYPE_Q3_K 11
#define LOOM_DTYPE_Q4_K 12
#define LOOM_DTYPE_Q5_K 13
#define LOOM_DTYPE_Q6_K 14
#define LOOM_DTYPE_Q8_K 15
#define LOOM_DTYPE_IQ4_NL 20 /* (ABI 1.1) */
#define LOOM_DTYPE_IQ4_XS 23 /* (ABI 1.1) */
#define LOOM_DTYPE_I8 24
#define LOOM_DTYPE_I16 25
#define LOOM_DTYPE_I32 26
#define LOOM_DTYPE_I64 27
#define LOOM_DTYPE_F64 28
#define LOOM_DTYPE_BF16 30
#define LOOM_DTYPE_MXFP4 39 /* (ABI 1.5) blocks of 32: one E8M0 exponent byte, 16 bytes of E2M1 nibbles */
/* Loom-specific formats live above 1000 so they never collide with future GGML ids. */
#define LOOM_DTYPE_INT8_KV 1001 /* INT8 KV cache: each row of ne0 values is one f32 scale then ne0 int8 */
#define LOOM_DTYPE_I8_ROW 1002  /* INT8 weights, per-channel: each row is one f32 scale then n int8 */
#define LOOM_DTYPE_I4_G128 1003 /* INT4 weights, group-wise: blocks of 128 as loom_block_i4_g128 */
/* (ABI 1.8) FP8 KV cache: one OCP E4M3 byte per value (sign, 4 exponent bits of bias 7, 3 mantissa
 * bits; subnormals; no infinities; 0x7F / 0xFF are NaN), no scale: values beyond +-448 saturate to it
 * (vLLM's fp8_e4m3 cache with its default scale of 1). A row of n values is n bytes. */
#define LOOM_DTYPE_F8_E4M3 1004
/* (ABI 1.15) FP8 weights with a scale per block of 32 (loom_block_f8_e4m3_b32): element j = E4M3
 * byte qs[j] (as LOOM_DTYPE_F8_E4M3) times the float32 d, each product rounded once to float32 as
 * the FP8 checkpoints' reference dequantization (weight.float() * scale) rounds it. Holds the FP8
 * releases (quant_method fp8's 128 x 128 blocks; compressed-tensors' per-tensor, per-channel and
 * block scales) as published; no code is NaN. */
#define LOOM_DTYPE_F8_E4M3_B32 1005

#define LOOM_QK4_0 32
#define LOOM_QK8_0 32
#define LOOM_QK5_0 32
#define LOOM_QK_K 256
#define LOOM_K_SCALE_SIZE 12

/* f16 bits; C has no portable half type. */
typedef uint16_t loom_half;

#define LOOM_QK_MXFP4 32

/* MXFP4 (OCP microscaling, gpt-oss's expert weights): element j = kvalues[nibble] * 2^(e - 128) with
 * kvalues {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12} (E2M1 doubled; hence 2^(e-128));
 * elements j and j + 16 share qs[j] (low, high nibble), as in Q4_0. */
typedef struct loom_block_mxfp4 {
  uint8_t e;
  uint8_t qs[LOOM_QK_MXFP4 / 2];
} loom_block_mxfp4;

typedef struct loom_block_q4_0 {
  loom_half d;               /* scale */
  uint8_t qs[LOOM_QK4_0 / 2]; /* nibbles: element j in low nibble of qs[j], element j+16 in high */
} loom_block_q4_0;

typedef struct loom_block_q5_0 {
  loom_half d;
  uint8_t qh[4];              /* bit j: the fifth (high) bit of element j */
  uint8_t qs[LOOM_QK5_0 / 2]; /* low nibbles, laid out as in Q4_0; x = (q - 16) * d */
} loom_block_q5_0;

typedef struct loom_block_q8_0 {
  loom_half d;
  int8_t qs[LOOM_QK8_0];
} loom_block_q8_0;

typedef struct loom_block_q4_k {
  loom_half d;                       /* super-block scale for the 6-bit sub-block scales */
  loom_half dmin;                    /* super-block scale for the 6-bit sub-block mins */
  uint8_t scales[LOOM_K_SCALE_SIZE]; /* 8 sub-blocks x (6-bit scale, 6-bit min), packed */
  uint8_t qs[LOOM_QK_K / 2];         /* 4-bit quants */
} loom_block_q4_k;

typedef struct loom_block_q6_k {
  uint8_t ql[LOOM_QK_K / 2];      /* lower 4 bits */
  uint8_t qh[LOOM_QK_K / 4];      /* upper 2 bits */
  int8_t scales[LOOM_QK_K / 16];  /* 8-bit sub-block scales */
  loom_half d;                    /* super-block scale */
} loom_block_q6_k;

#define LOOM_QK_F8_E4M3_B32 32

typedef struct loom_block_f8_e4m3_b32 {
  float d;
  uint8_t qs[LOOM_QK_F8_E4M3_B32]; /* OCP E4M3 codes */
} loom_block_f8_e4m3_b32;

/* Group-wise INT4 (GPTQ/AWQ style): x = d * q + m with q in 0..15. */
typedef struct loom_block_i4_g128 {
  loom_half d;
  loom_half m;
  uint8_t qs[64]; /* element j in the low nibble of qs[j], element j+64 in the high nibble */
} loom_block_i4_g128;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_DTYPE_H */
