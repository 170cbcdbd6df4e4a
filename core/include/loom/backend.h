/*
 * loom/backend.h — the compute / attention backend kind (LOOM_PLUGIN_KIND_BACKEND).
 *
 * Model: backend instance (one device) -> buffers (opaque device memory) -> streams (ordered queues)
 * -> ops enqueued on a stream. Every op and copy is *enqueued*; results are visible to the host only
 * after stream_synchronize. A synchronous backend (the CPU reference) may run work immediately: that
 * is a valid implementation of the same contract, so CUDA (streams, graphs) and Vulkan (command
 * buffers, timeline semaphores) fit without a second ABI.
 *
 * The core never dereferences device memory. It uploads inputs with copy_to_device and reads results
 * with copy_to_host. buffer_host_pointer is an optional fast path for backends whose memory is the
 * host's.
 *
 * Threading: slots on a backend instance are thread-safe unless stated; a stream is externally
 * synchronised (one thread enqueues on it at a time). Ops on different streams may run concurrently.
 */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H

#include "loom/abi.h"
#include "loom/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_backend loom_backend_t; /* one device, opaque */
typedef struct loom_buffer loom_buffer_t;   /* device memory, opaque */
typedef struct loom_stream loom_stream_t;   /* ordered work queue, opaque; NULL = default stream */

/* ---------------------------------------------------------------------------------------------
 * Tensors: a typed view of a buffer. ne[0] is the innermost (contiguous) dimension; nb[i] is the
 * byte stride of dimension i. For block-quantized types a row (ne[0] elements) is a whole number of
 * blocks and nb[0] is the block size in bytes. Unused dimensions have ne = 1.
 * ------------------------------------------------------------------------------------------- */
typedef struct loom_tensor {
  uint32_t struct_size;
  loom_dtype dtype;
  loom_buffer_t *buffer; /* borrowed; NULL marks an absent optional operand */
  uint64_t offset;       /* bytes from the start of the buffer */
  int64_t ne[4];
  uint64_t nb[4];
} loom_tensor;

/* ---------------------------------------------------------------------------------------------
 * Ops. Shapes are written innermost first, as [ne0, ne1, ...]. All activations are F32 unless an op
 * says otherwise. An op reads its srcs and writes dst; STORE_KV writes into its cache operands.
 * ------------------------------------------------------------------------------------------- */
typedef int32_t loom_op_type;
/* dst[dim, n] = rows `ids` of table. src0 table [dim, n_rows] any weight dtype; src1 ids I32 [n]. */
#define LOOM_OP_GET_ROWS 1
/* dst[n_out, n_tok] = x · Wᵀ. src0 W [n_in, n_out] any weight dtype; src1 x F32 [n_in, n_tok]. */
#define LOOM_OP_MATMUL 2
/* dst = src0 + src1; src1 has the same shape or one row [ne0, 1] broadcast over rows. */
#define LOOM_OP_ADD 3
/* dst = src0 * src1 (element-wise, same broadcasting as ADD). */
#define LOOM_OP_MUL 4
/* dst = src0 * params.scale. params: loom_scale_params. */
#define LOOM_OP_SCALE 5
/* dst = src0 / rms(src0 row) * (src1 if present). Rows of ne0. params: loom_norm_params. */
#define LOOM_OP_RMS_NORM 6
/* Rotary embedding. src0 x [head_dim, n_heads, n_tok]; src1 positions I32 [n_tok]; with
 * LOOM_ROPE_FREQ_FACTORS in the mode, src2 frequency factors F32 [n_dims / 2].
 * params: loom_rope_params. */
#define LOOM_OP_ROPE 7
/* dst = act(src0) * src1 (gated linear unit). params: loom_glu_params. */
#define LOOM_OP_GLU 8
/* dst = act(src0). params: loom_glu_params (only `activation` is read). */
#define LOOM_OP_UNARY 9
/* dst = convert(src0): copy with dtype conversion between F32, F16 and BF16. */
#define LOOM_OP_COPY 10
/* Write keys and values into the paged cache. src0 k [head_dim, n_kv_heads, n_tok];
 * src1 v [head_dim, n_kv_heads, n_tok]; src2 slot_mapping I32 [n_tok] (slot = block * block_size +
 * offset; negative = skip); src3 k_cache and src4 v_cache [head_dim, n_kv_heads, n_slots] of dtype
 * F32, F16 or LOOM_DTYPE_INT8_KV. dst is unused (buffer NULL). */
#define LOOM_OP_STORE_KV 11
/* Causal attention over the paged cache, prefill and decode alike.
 * src0 q [head_dim, n_heads, n_tok]; src1 k_cache, src2 v_cache as in STORE_KV;
 * src3 block_tables I32 [max_blocks_per_seq, n_seqs]; src4 seqs I32 [4, n_seqs]: for each sequence
 * (first query row, number of query rows, context length including those rows, 0). Query row i of a
 * sequence sits at position context_len - n_query + i and sees keys 0..that position (and only the
 * last `sliding_window` of them when it is non-zero). dst [head_dim, n_heads, n_tok].
 * params: loom_attention_params. Grouped-query: head h reads kv head h / (n_heads / n_kv_heads).
 * (ABI 1.5) Optional src5 sinks F32 [n_heads] (gpt-oss): head h's softmax also counts a key of
 * score sinks[h] that has no value, so the weights of the real keys sum to less than 1. A backend
 * that does not implement sinks answers UNSUPPORTED when src5 is present.
 * (ABI 1.9) With LOOM_ATTENTION_SEQ_FLAGS in params.flags, column 3 of seqs holds flags: with
 * LOOM_SEQ_NON_CAUSAL every query row of the sequence sees keys up to context_len - 1, not just up to
 * its own position (Gemma 3 decodes an image's rows so; a sliding window still bounds the keys before
 * a row). A batch may hold one sequence as several consecutive entries over the same block table, a
 * causal part and a non-causal part. A backend without it answers UNSUPPORTED for the flag. */
#define LOOM_OP_PAGED_ATTENTION 12
/* dst = src0 row-wise softmax (used by tests and samplers on device). */
#define LOOM_OP_SOFTMAX 13
/* (ABI 1.5) Mixture-of-experts routing: for each token, pick the n_used experts with the highest
 * gate probabilities and their weights. src0 router logits F32 [n_expert, n_tok]; src1 ids I32
 * [n_used, n_tok], written by the op (like STORE_KV's caches): the chosen experts, best first;
 * dst weights F32 [n_used, n_tok]. params: loom_moe_route_params. A backend that does not
 * implement the MoE ops answers UNSUPPORTED for all three. */
#define LOOM_OP_MOE_ROUTE 14
/* (ABI 1.5) One matmul per (token, chosen expert): dst[:, j, t] = x[:, j, t] · W[ids[j, t]]ᵀ.
 * src0 W [n_in, n_out, n_expert] any weight dtype (each expert a whole matrix); src1 x F32
 * [n_in, n_used or 1, n_tok] (with 1, every expert of a token reads the same row); src2 ids I32
 * [n_used, n_tok] (each in 0..n_expert-1); optional src3 bias F32 [n_out, n_expert]: dst[:, j, t] +=
 * bias[:, ids[j, t]]; dst F32 [n_out, n_used, n_tok]. What makes MoE serving cheap: a backend groups
 * a batch's rows by expert, so each expert's matrix is read once per op. */
#define LOOM_OP_MOE_MATMUL 15
/* (ABI 1.5) dst[:, t] = sum_j src1[j, t] * src0[:, j, t]. src0 F32 [ne0, n_used, n_tok]; src1 weights
 * F32 [n_used, n_tok]; dst F32 [ne0, n_tok]. */
#define LOOM_OP_MOE_SUM 16
/* (ABI 1.6) Causal short convolution with a per-sequence state (the short conv of Gated DeltaNet /
 * Mamba layers). src0 x F32 [channels, n_tok]; src1 weight F32 [d_conv, channels]; src2 states F32
 * [d_conv - 1, channels, n_slots], read and written; src3 seqs I32 [4, n_seqs]: for each sequence
 * (first row, number of rows, state slot, fresh), its rows consecutive in x. For sequence s with
 * window w = (slot's state columns, then its rows of x): dst[c, first + t] = sum_i src1[i, c] *
 * w[c, t + i]. fresh != 0 means the sequence starts in this batch: its state is read as zeros.
 * Afterwards the slot holds the sequence's last d_conv - 1 inputs. dst F32 [channels, n_tok].
 * A backend that does not implement the recurrent ops answers UNSUPPORTED for both. */
#define LOOM_OP_SSM_CONV 17
/* (ABI 1.6) Gated delta rule (Gated DeltaNet linear attention) over a per-sequence state, token by
 * token. src0 qk F32 [d_k, n_k_heads, 2, n_tok]: q at index 0 and k at index 1 of dim 2 (a view of
 * one row holding q then k, or of two buffers' worth of strides); src1 v F32 [d_v, n_v_heads, n_tok];
 * src2 g F32 [n_v_heads, n_tok] (log decay, <= 0); src3 beta F32 [n_v_heads, n_tok] (write strength,
 * in 0..1); src4 states F32 [d_k, d_v, n_v_heads, n_slots], read and written; src5 seqs as in
 * SSM_CONV. Rows must be contiguous; other strides are free. v head h reads q/k head h % n_k_heads
 * (tiled, Qwen 3.5), or h / (n_v_heads / n_k_heads) with params.grouped_heads (ABI 1.7, Qwen3-Next).
 * With params.normalize_qk, q and k are first divided by sqrt(sum(x^2) + l2_eps). Per token, with
 * S = the slot's state of head h (S[i, j]: key dim i, value dim j; zeros when fresh):
 *   S *= exp(g);  d_j = beta * (v_j - sum_i S[i, j] k_i);  S[i, j] += k_i d_j;
 *   dst[j] = q_scale * sum_i S[i, j] q_i.
 * dst F32 [d_v, n_v_heads, n_tok]. params: loom_delta_net_params. */
#define LOOM_OP_GATED_DELTA_NET 18
/* (ABI 1.9) The encoder ops: what vision encoders (and, later, embedding models) need beyond the decoder
 * ops. A backend that does not implement them answers UNSUPPORTED for all four.
 *
 * Layer norm over rows of ne0: dst = (x - mean) / sqrt(var + eps) * src1 + src2, with the population
 * variance; src1 weight and src2 bias F32 [ne0] are each optional. params: loom_norm_params. */
#define LOOM_OP_LAYER_NORM 19
/* Attention over keys and values held in ordinary tensors (no cache): an encoder's self-attention.
 * src0 q [head_dim, n_heads, n_tok]; src1 k and src2 v [head_dim, n_kv_heads, n_tok]; optional src3
 * seqs I32 [2, n_seqs]: (first row, number of rows) per sequence, each row attending only to the rows
 * of its own sequence; absent, all rows are one sequence. Row i of a sequence sees every row of it, or
 * rows 0..i with params.causal. Grouped-query as PAGED_ATTENTION. dst [head_dim, n_heads, n_tok].
 * params: loom_encoder_attention_params. */
#define LOOM_OP_ATTENTION 20
/* The non-overlapping patches of an image as rows, so a patch-embedding convolution whose stride equals
 * its kernel is one MATMUL (its weight [p, p, channels, n_out] read as [p*p*channels, n_out]).
 * src0 image F32 [width, height, channels] (planar); dst F32 [p * p * channels, (width / p) * (height / p)]:
 * patch (px, py) is row px + py * (width / p), and its element kx + p * (ky + p * c) is
 * image[px * p + kx, py * p + ky, c]. width and height are multiples of p. params: loom_patch_params. */
#define LOOM_OP_PATCHES 21
/* Average pooling of a grid of rows: src0 F32 [channels, width, height]; dst F32 [channels, width / k,
 * height / k], dst[:, i, j] = the mean of src0[:, k*i .. k*i+k-1, k*j .. k*j+k-1] (width and height are
 * multiples of k). params: loom_pool_params. */
#define LOOM_OP_POOL_2D 22
/* (ABI 1.11) dst = min(max(src0, params.min), params.max), element-wise, F32: the input and output
 * bounds of Gemma 4's clippable linears (its vision encoder). params: loom_clamp_params. */
#define LOOM_OP_CLAMP 23
/* (ABI 1.16) Low-rank adapters (LoRA) applied at run time, several in one batch (punica's SGMV): the
 * rows of a batch that use adapter slot s get dst[:, t] += scales[s] * B_s · (A_s · x[:, t]); rows of
 * slot -1 stay as they are. It follows the base MATMUL into the same dst, so the base weights are read
 * once for the whole batch whatever adapters its rows use, and a backend groups the rows by slot so
 * each adapter is read once. src0 A F32 or F16 [n_in, rank, n_slots] (slot s's down-projection: row j
 * is A_s's row j); src1 B F32 or F16 [n_out, rank, n_slots] (B_s transposed: row j is B_s's column j, so
 * the additions run along the outputs); rows past an adapter's own rank are zeros in both; src2 x F32
 * [n_in, n_tok]; src3 slots I32 [n_tok], each -1 or 0..n_slots-1; src4 scales F32 [n_slots]; dst F32
 * [n_out, n_tok], read and written. A backend that does not implement it answers UNSUPPORTED. */
#define LOOM_OP_LORA 24

#define LOOM_OP_MAX_SRC 6

typedef struct loom_encoder_attention_params { /* (ABI 1.9) LOOM_OP_ATTENTION */
  uint32_t struct_size;
  float scale;     /* 0 = 1/sqrt(head_dim) */
  uint32_t causal; /* 1: row i of a sequence sees only rows 0..i of it */
  uint32_t reserved;
  /* (ABI 1.14) A backend built before 1.14 does not read these; the host checks the plugin's ABI minor
   * before it sets them, and a backend that does not implement one answers UNSUPPORTED when it is set. */
  uint32_t window;      /* 0 = none; else row i sees only the rows j of its sequence with |i - j| <= window / 2
                         * (llama.cpp's symmetric sliding window: EmbeddingGemma, ModernBERT's local layers) */
  float alibi_max_bias; /* 0 = none; else head h's score of row j from row i gets -slope(h) * |i - j| added
                         * (symmetric ALiBi, jina-bert-v2), slope(h) from max_bias and n_heads as ggml's
                         * soft_max_ext: with n = the largest power of two <= n_heads, m0 = 2^(-max_bias / n),
                         * m1 = 2^(-max_bias / 2n), slope(h) = m0^(h+1) for h < n, else m1^(2(h-n)+1) */
} loom_encoder_attention_params;

typedef struct loom_patch_params { /* (ABI 1.9) LOOM_OP_PATCHES */
  uint32_t struct_size;
  uint32_t patch_size;
} loom_patch_params;

typedef struct loom_pool_params { /* (ABI 1.9) LOOM_OP_POOL_2D */
  uint32_t struct_size;
  uint32_t kernel; /* window and stride */
} loom_pool_params;

typedef struct loom_clamp_params { /* (ABI 1.11) LOOM_OP_CLAMP */
  uint32_t struct_size;
  float min;
  float max;
} loom_clamp_params;

typedef int32_t loom_activation;
#define LOOM_ACTIVATION_SILU 1
#define LOOM_ACTIVATION_GELU_TANH 2 /* GELU, tanh approximation (Gemma's GeGLU) */
#define LOOM_ACTIVATION_GELU_ERF 3
#define LOOM_ACTIVATION_RELU 4
/* (ABI 1.5, GLU only) gpt-oss: g' = min(g, 7), u' = clamp(u, -7, 7); dst = g' * sigmoid(1.702 g') * (u' + 1) */
#define LOOM_ACTIVATION_SWIGLU_OAI 5
/* (ABI 1.5) 1 / (1 + exp(-x)): the gate of qwen2moe's shared expert */
#define LOOM_ACTIVATION_SIGMOID 6
/* (ABI 1.6) log(1 + exp(x)) (x itself above 20, as ggml): Gated DeltaNet's decay */
#define LOOM_ACTIVATION_SOFTPLUS 7
/* (ABI 1.10) x * sigmoid(1.702 x): CLIP's quick GELU (LLaVA-style vision encoders) */
#define LOOM_ACTIVATION_GELU_QUICK 8

typedef struct loom_scale_params {
  uint32_t struct_size;
  float scale;
} loom_scale_params;

typedef struct loom_norm_params {
  uint32_t struct_size;
  float eps;
} loom_norm_params;

typedef int32_t loom_rope_mode;
#define LOOM_ROPE_NORMAL 0 /* rotate adjacent pairs (x0,x1), (x2,x3): llama */
#define LOOM_ROPE_NEOX 2   /* rotate halves (x_i, x_{i+d/2}): gpt-neox, qwen2, gemma */
/* (ABI 1.1) Or'd into the mode: src2 is F32 [n_dims / 2] and pair i's frequency is divided by
 * src2[i] (Llama 3.1+'s rope_freqs, LongRoPE's factors): theta_i = pos * freq_scale *
 * freq_base^(-2i/n_dims) / src2[i]. A backend that does not implement it answers UNSUPPORTED. */
#define LOOM_ROPE_FREQ_FACTORS 0x100
/* (ABI 1.2) Or'd into the mode: YaRN's blend of interpolated and original frequencies. With
 * theta_extrap = pos * freq_base^(-2i/n_dims) [/ src2[i]] and theta_interp = freq_scale * theta_extrap,
 * pair i turns by theta_interp * (1 - r_i) + theta_extrap * r_i, where
 * r_i = yarn_ext_factor * (1 - clamp((i - yarn_corr_dims[0]) / max(0.001, yarn_corr_dims[1] - yarn_corr_dims[0]), 0, 1)).
 * YaRN's magnitude correction is not part of the op: the caller folds it into the attention scale.
 * A backend that does not implement it answers UNSUPPORTED. */
#define LOOM_ROPE_YARN 0x200
/* (ABI 1.12) Or'd into a NEOX mode: multi-section rope (Qwen2-VL's M-RoPE, ggml's ROPE_TYPE_MROPE).
 * src1 positions are I32 [n_tok, 4]: each token's time, height, width and extra components, in that
 * order along ne1. Pair i (of n_dims / 2) takes the component of its sector s = i % (sum of sections):
 * time while s < sections[0], height while s < sections[0] + sections[1], width while s < the first
 * three's sum, else extra; its angle is that position * freq_scale * freq_base^(-2i/n_dims) [/ src2[i]].
 * With one position in all four components it is plain NEOX rope. A backend that does not implement it
 * answers UNSUPPORTED. */
#define LOOM_ROPE_MROPE 0x400
/* (ABI 1.13) Or'd with LOOM_ROPE_MROPE: the sections interleave (Qwen3-VL's and Qwen 3.5's M-RoPE, ggml's
 * ROPE_TYPE_IMROPE). Pair i's sector s = i % (sum of sections) takes height when s % 3 == 1 and
 * s < 3 * sections[1], width when s % 3 == 2 and s < 3 * sections[2], time when s % 3 == 0 and
 * s < 3 * sections[0], else extra. A backend that does not implement it answers UNSUPPORTED. */
#define LOOM_ROPE_MROPE_INTERLEAVED 0x800

typedef struct loom_rope_params {
  uint32_t struct_size;
  loom_rope_mode mode;
  uint32_t n_dims;  /* rotated dimensions (<= head_dim); the rest pass through */
  float freq_base;  /* theta */
  float freq_scale; /* 1 / linear scaling factor */
  /* Read only with LOOM_ROPE_YARN (ABI 1.2; before, reserved and zero). */
  float yarn_ext_factor;   /* 0..1: weight of the original frequencies in the ramp */
  float yarn_corr_dims[2]; /* first and last pair index of the ramp */
  /* Read only with LOOM_ROPE_MROPE (ABI 1.12): pairs per component section, non-negative, sum > 0
   * (interleaved, ABI 1.13: the sections count the pairs of each component within a sector's cycle). */
  int32_t sections[4];
} loom_rope_params;

typedef struct loom_glu_params {
  uint32_t struct_size;
  loom_activation activation;
} loom_glu_params;

typedef struct loom_attention_params {
  uint32_t struct_size;
  float scale;             /* usually 1/sqrt(head_dim) */
  uint32_t block_size;     /* tokens per KV block */
  uint32_t sliding_window; /* 0 = full causal attention */
  float softcap;           /* 0 = none; else logits = softcap * tanh(logits / softcap) */
  uint32_t flags;          /* (ABI 1.9; before, reserved and zero) LOOM_ATTENTION_* */
} loom_attention_params;
#define LOOM_ATTENTION_SEQ_FLAGS 1u /* (ABI 1.9) column 3 of PAGED_ATTENTION's seqs holds LOOM_SEQ_* flags */
#define LOOM_SEQ_NON_CAUSAL 1       /* (ABI 1.9) the sequence's rows see its whole context */

typedef int32_t loom_moe_gating;
/* probabilities = softmax over all experts' logits; weights = the chosen experts' probabilities */
#define LOOM_MOE_GATING_SOFTMAX 1
/* probabilities = sigmoid(logit) per expert */
#define LOOM_MOE_GATING_SIGMOID 2
/* choose by logit; weights = softmax over the chosen experts' logits only (gpt-oss) */
#define LOOM_MOE_GATING_SOFTMAX_CHOSEN 3

typedef struct loom_moe_route_params {
  uint32_t struct_size;
  uint32_t n_used;         /* experts per token (== ids ne[0]) */
  loom_moe_gating gating;
  uint32_t normalize;      /* 1: divide the weights by their sum (at least 2^-14), as most families do */
  float scale;             /* weights *= scale afterwards; 0 or 1 = none */
} loom_moe_route_params;

typedef struct loom_delta_net_params {
  uint32_t struct_size;
  float q_scale;         /* 0 = 1 / sqrt(d_k) */
  uint32_t normalize_qk; /* 1: L2-normalise each q and k head first */
  float l2_eps;
  /* (ABI 1.7; read only when struct_size covers it) 1: value heads are grouped by key head (v head h
   * reads key head h / (n_v_heads / n_k_heads)); 0: tiled (h % n_k_heads). A backend of ABI 1.6
   * ignores it, so the core refuses grouped models on such a backend. */
  uint32_t grouped_heads;
} loom_delta_net_params;

typedef struct loom_op {
  uint32_t struct_size;
  loom_op_type type;
  loom_tensor dst;
  uint32_t n_src;
  uint32_t reserved;
  loom_tensor src[LOOM_OP_MAX_SRC];
  const void *params; /* op-specific struct starting with struct_size, borrowed for the call; or NULL */
} loom_op;

/* ---------------------------------------------------------------------------------------------
 * Capabilities.
 * ------------------------------------------------------------------------------------------- */
#define LOOM_BACKEND_MAX_DTYPES 32

typedef struct loom_backend_caps {
  uint32_t struct_size;
  uint32_t host_memory;             /* 1 when buffers are host memory (buffer_host_pointer works) */
  char device_name[128];
  uint64_t memory_total;            /* bytes; 0 = unknown */
  uint64_t memory_free;             /* bytes; 0 = unknown */
  uint32_t n_weight_dtypes;         /* formats MATMUL and GET_ROWS accept as src0 */
  loom_dtype weight_dtypes[LOOM_BACKEND_MAX_DTYPES];
  uint32_t n_kv_dtypes;             /* KV cache element types */
  loom_dtype kv_dtypes[8];
  uint32_t max_head_dim;
  uint32_t max_block_size;          /* largest paged-attention block size */
  /* (ABI 1.18) 1 when this instance was created with config "batch_invariant": true and honours it:
   * every op's result for one row (a token) is bit-identical whatever other rows share the call, so a
   * sequence computes the same bits alone or in any batch. 0 otherwise, and for a table from before
   * 1.18 (its shorter struct leaves the field as the host zeroed it). */
  uint32_t batch_invariant;
} loom_backend_caps;

typedef int32_t loom_buffer_usage;
#define LOOM_BUFFER_USAGE_WEIGHTS 0 /* written once, read by ops */
#define LOOM_BUFFER_USAGE_COMPUTE 1 /* activations and scratch */
#define LOOM_BUFFER_USAGE_KV 2      /* KV cache pool */

/* ---------------------------------------------------------------------------------------------
 * The function table. Append-only; NULL = unimplemented.
 * `config_json` for create is an object, e.g. {"device": 0, "threads": 2}; unknown keys are ignored.
 * (ABI 1.18) "batch_invariant": true asks for batch-invariant results (loom_backend_caps.batch_invariant
 * tells the host whether the instance gives them; a backend that cannot may still create it).
 * ------------------------------------------------------------------------------------------- */
typedef struct loom_backend_i {
  uint32_t struct_size;
  uint32_t reserved;

  /* Devices this plugin can drive now. On 0 devices writes a reason ("no Vulkan loader", ...).
   * Thread-safe. Must not be NULL. */
  loom_status (*device_count)(uint32_t *out_count, char *reason, uint32_t reason_size);
  /* Name of device `index` into `out` (UTF-8, truncated to size). Thread-safe. NULL = unnamed. */
  loom_status (*device_name)(uint32_t index, char *out, uint32_t size);

  /* Create an instance on a device. `host` outlives the instance. On failure writes a message into
   * `error` (LOOM_ERROR_BUFFER_SIZE bytes recommended). Thread-safe. Must not be NULL. */
  loom_status (*create)(const loom_host_services *host, const char *config_json, loom_backend_t **out,
                        char *error, uint32_t error_size);
  /* Destroy the instance; every buffer and stream must have been destroyed. Must not be NULL. */
  void (*destroy)(loom_backend_t *backend);
  /* Message of the calling thread's last failed call on this instance; owned by the plugin, valid
   * until that thread's next call. Must not be NULL. */
  const char *(*last_error)(loom_backend_t *backend);

  /* Fill `out` (caller sets out->struct_size). Thread-safe. Must not be NULL. */
  loom_status (*get_caps)(loom_backend_t *backend, loom_backend_caps *out);
  /* Can this instance run `op` with these dtypes and shapes? LOOM_STATUS_OK, or UNSUPPORTED with a
   * reason. Buffers in the op may be NULL (only types and shapes are asked). NULL slot = the host
   * assumes the op is supported and relies on run_ops errors. */
  loom_status (*supports_op)(loom_backend_t *backend, const loom_op *op, char *reason, uint32_t reason_size);

  /* Device memory. Contents are undefined until written. Thread-safe. */
  loom_status (*buffer_create)(loom_backend_t *backend, uint64_t size, loom_buffer_usage usage,
                               loom_buffer_t **out);
  void (*buffer_destroy)(loom_backend_t *backend, loom_buffer_t *buffer);
  /* Host address of the buffer when the backend's memory is host memory; NULL otherwise or if the
   * slot is NULL. Valid until buffer_destroy. Writes through it must be followed by no op on the same
   * bytes before stream_synchronize of every stream that used them. */
  void *(*buffer_host_pointer)(loom_backend_t *backend, loom_buffer_t *buffer);

  /* Streams. NULL stream = the instance's default stream. */
  loom_status (*stream_create)(loom_backend_t *backend, loom_stream_t **out);
  void (*stream_destroy)(loom_backend_t *backend, loom_stream_t *stream);
  /* Block until all work enqueued on `stream` has finished. Returns the first error of that work. */
  loom_status (*stream_synchronize)(loom_backend_t *backend, loom_stream_t *stream);

  /* Enqueue copies. Host memory (src for to_device, dst for to_host) must stay valid until the
   * stream is synchronised. Offsets and sizes are bytes and must lie inside the buffer. */
  loom_status (*copy_to_device)(loom_backend_t *backend, loom_stream_t *stream, loom_buffer_t *dst,
                                uint64_t dst_offset, const void *src, uint64_t size);
  loom_status (*copy_to_host)(loom_backend_t *backend, loom_stream_t *stream, void *dst, loom_buffer_t *src,
                              uint64_t src_offset, uint64_t size);
  loom_status (*copy_buffer)(loom_backend_t *backend, loom_stream_t *stream, loom_buffer_t *dst,
                             uint64_t dst_offset, loom_buffer_t *src, uint64_t src_offset, uint64_t size);

  /* Enqueue `n_ops` ops in order. The op array and params are borrowed for the call only. A backend
   * may capture a sequence it has seen before (CUDA graphs, recorded command buffers). */
  loom_status (*run_ops)(loom_backend_t *backend, loom_stream_t *stream, const loom_op *ops, uint32_t n_ops);

  /* (ABI 1.5) The instance's counters since create, as one JSON object of numbers (e.g.
   * {"moe_expert_reads": 12, "moe_rows": 48}), NUL-terminated into `out`; INVALID_ARGUMENT when it
   * does not fit. Thread-safe; reflects the work of every synchronised stream. Absent (a table from
   * before 1.5) or NULL = no counters. */
  loom_status (*get_stats)(loom_backend_t *backend, char *out, uint32_t size);
} loom_backend_i;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_BACKEND_H */
