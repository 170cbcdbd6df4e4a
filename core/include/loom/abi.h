/*
 * loom/abi.h — the common part of Loom's plugin C ABI.
 *
 * Contract (see docs/abi.md for the full text):
 *  - A plugin library exports exactly one symbol, `loom_plugin_query` (LOOM_PLUGIN_ENTRY_SYMBOL).
 *    The host calls it first with the ABI version it speaks; the plugin answers with a descriptor
 *    naming the ABI version *it* speaks, or refuses.
 *  - ABI major changes are breaking; minor changes only append struct members and table slots.
 *  - Every struct that crosses the boundary starts with `struct_size`. A reader checks it before
 *    touching a member; a member past the end is "absent" (use LOOM_HAS_MEMBER).
 *  - Function tables are append-only. A NULL slot means "unimplemented": the host answers
 *    LOOM_STATUS_UNIMPLEMENTED instead of calling it.
 *  - No exceptions, no C++ types, no frees across the boundary. Objects are destroyed by the side
 *    that created them, through that side's destroy slot.
 *  - Strings returned by a plugin are UTF-8 and owned by the plugin; their lifetime is stated per slot.
 */
#ifndef LOOM_ABI_H
#define LOOM_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_ABI_MAJOR 1
/* Minor versions: 1.1 added LOOM_ROPE_FREQ_FACTORS (backend.h), LOOM_DTYPE_IQ4_NL and LOOM_DTYPE_IQ4_XS;
 * 1.2 added LOOM_ROPE_YARN (backend.h); 1.3 added loom_sampling_params.allowed_tokens (sampler.h);
 * 1.4 added loom_kv_i.set_event_sink and loom_kv_event (kv.h); 1.5 added the mixture-of-experts ops
 * LOOM_OP_MOE_ROUTE, LOOM_OP_MOE_MATMUL and LOOM_OP_MOE_SUM, attention sinks (PAGED_ATTENTION src5),
 * LOOM_ACTIVATION_SWIGLU_OAI, LOOM_ACTIVATION_SIGMOID and loom_backend_i.get_stats (backend.h), and LOOM_DTYPE_MXFP4 (dtype.h);
 * 1.6 added the recurrent ops LOOM_OP_SSM_CONV and LOOM_OP_GATED_DELTA_NET and LOOM_ACTIVATION_SOFTPLUS
 * (backend.h), and per-sequence state slots in the KV allocator (kv.h: seq_state_slot,
 * take_pending_state_copies, loom_kv_stats.n_state_slots / n_state_free); 1.7 added recurrent-state
 * checkpoints for prefix reuse by hybrid models (kv.h: seq_checkpoint_state, config key
 * n_state_checkpoints, loom_kv_stats.n_state_checkpoints / n_checkpoints_held) and
 * loom_delta_net_params.grouped_heads (backend.h: Qwen3-Next's value-head order); 1.8 added
 * LOOM_DTYPE_F8_E4M3 (dtype.h), an FP8 KV cache type; 1.9 added the encoder ops LOOM_OP_LAYER_NORM,
 * LOOM_OP_ATTENTION, LOOM_OP_PATCHES and LOOM_OP_POOL_2D (backend.h: vision encoders) and non-causal
 * sequences in PAGED_ATTENTION (loom_attention_params.flags, LOOM_ATTENTION_SEQ_FLAGS); 1.10 added
 * LOOM_ACTIVATION_GELU_QUICK (backend.h: CLIP's quick GELU in LLaVA-style vision encoders); 1.11
 * added LOOM_OP_CLAMP (backend.h: Gemma 4's clippable linears in its vision encoder); 1.12 added
 * LOOM_ROPE_MROPE and loom_rope_params.sections (backend.h: Qwen2-VL's multi-section positions); 1.13
 * added LOOM_ROPE_MROPE_INTERLEAVED (backend.h: Qwen3-VL's interleaved sections); 1.14 added
 * loom_encoder_attention_params.window and .alibi_max_bias (backend.h: the symmetric sliding window and
 * ALiBi of text encoders); 1.15 added LOOM_DTYPE_F8_E4M3_B32 (dtype.h: FP8 weights with a float
 * scale per block of 32, the FP8 checkpoints' layers); 1.16 added LOOM_OP_LORA (backend.h: low-rank
 * adapters applied at run time, several in one batch); 1.17 added the samplers users tune (sampler.h:
 * top-n-sigma, XTC, DRY, Mirostat); 1.18 added loom_backend_caps.batch_invariant and the create config
 * key "batch_invariant" (backend.h: results that do not depend on the batch, for deterministic
 * serving). */
#define LOOM_ABI_MINOR 18

#define LOOM_PLUGIN_ENTRY_SYMBOL "loom_plugin_query"

#if defined(_WIN32)
#define LOOM_EXPORT __declspec(dllexport)
#else
#define LOOM_EXPORT __attribute__((visibility("default")))
#endif

/* True when a struct of the given (reader-checked) size contains MEMBER. */
#define LOOM_HAS_MEMBER(ptr, type, member) \
  ((ptr) != NULL && (ptr)->struct_size >= offsetof(type, member) + sizeof(((type *)0)->member))

/* ---------------------------------------------------------------------------------------------
 * Status codes. Fixed-width so the enum's size never depends on the compiler.
 * ------------------------------------------------------------------------------------------- */
typedef int32_t loom_status;
#define LOOM_STATUS_OK 0
#define LOOM_STATUS_INVALID_ARGUMENT 1 /* the caller passed something wrong; message says what */
#define LOOM_STATUS_UNIMPLEMENTED 2    /* the slot or feature does not exist in this plugin */
#define LOOM_STATUS_UNSUPPORTED 3      /* exists, but not for these inputs (dtype, shape, ...) */
#define LOOM_STATUS_OUT_OF_MEMORY 4    /* host or device allocation failed */
#define LOOM_STATUS_VERSION_MISMATCH 5 /* ABI negotiation failed */
#define LOOM_STATUS_NOT_FOUND 6        /* unknown id, sequence, device, ... */
#define LOOM_STATUS_OUT_OF_RANGE 7     /* index or size beyond a limit */
#define LOOM_STATUS_DEVICE_ERROR 8     /* the device or driver failed */
#define LOOM_STATUS_INTERNAL 9         /* a bug in the plugin */

/* ---------------------------------------------------------------------------------------------
 * Plugin kinds.
 * ------------------------------------------------------------------------------------------- */
typedef int32_t loom_plugin_kind;
#define LOOM_PLUGIN_KIND_BACKEND 1   /* compute + paged attention: loom/backend.h */
#define LOOM_PLUGIN_KIND_KV 2        /* KV block allocator: loom/kv.h */
#define LOOM_PLUGIN_KIND_QUANTIZER 3 /* weight / KV formats: loom/quant.h */
#define LOOM_PLUGIN_KIND_SAMPLER 4   /* sampling chain: loom/sampler.h */
#define LOOM_PLUGIN_KIND_DRAFTER 5   /* speculative-decoding drafter: loom/drafter.h */

/* ---------------------------------------------------------------------------------------------
 * Extension chain: optional features hang off `next` pointers, identified by a type tag.
 * Unknown types are skipped by readers.
 * ------------------------------------------------------------------------------------------- */
typedef struct loom_extension {
  uint32_t struct_size;
  uint32_t type; /* LOOM_EXT_* */
  const struct loom_extension *next;
} loom_extension;

/* ---------------------------------------------------------------------------------------------
 * Host services: a table the core passes to every plugin at create time. It outlives every object
 * the plugin creates with it. All slots are thread-safe unless stated.
 * ------------------------------------------------------------------------------------------- */
typedef int32_t loom_log_level;
#define LOOM_LOG_DEBUG 0
#define LOOM_LOG_INFO 1
#define LOOM_LOG_WARN 2
#define LOOM_LOG_ERROR 3

typedef struct loom_host_model loom_host_model_t; /* opaque: a model run by the core for a drafter */

typedef struct loom_host_model_info {
  uint32_t struct_size;
  uint32_t n_vocab;   /* logits per token */
  uint32_t n_ctx;     /* maximum positions per sequence */
  uint32_t reserved;
} loom_host_model_info;

typedef struct loom_host_services {
  uint32_t struct_size;
  uint32_t abi_major; /* the ABI the host speaks */
  uint32_t abi_minor;
  uint32_t reserved;
  void *context; /* passed back as the first argument of every slot below */

  /* Log a message. `plugin` and `message` are borrowed for the call. Thread-safe. Never NULL. */
  void (*log)(void *context, loom_log_level level, const char *plugin, const char *message);
  /* Host memory owned by the host's allocator; freed with `free` below. Thread-safe. Never NULL.
   * Returns NULL on failure. `alignment` is a power of two (0 means default). */
  void *(*alloc)(void *context, uint64_t size, uint64_t alignment);
  void (*free)(void *context, void *ptr);

  /* ---- Running a model through the core (for drafters). NULL when the host offers no models. ---- */
  /* Open a GGUF model on the core's backend. `gguf_path` is borrowed. The model is closed with
   * model_close. Thread-safe; each model is externally synchronised by its user. */
  loom_status (*model_open)(void *context, const char *gguf_path, loom_host_model_t **out_model);
  void (*model_close)(void *context, loom_host_model_t *model);
  loom_status (*model_get_info)(void *context, loom_host_model_t *model, loom_host_model_info *out_info);
  /* Append `n_tokens` tokens to sequence `seq_id` (created on first use) and write the logits of
   * every appended token to `out_logits` [n_tokens, n_vocab] (host memory owned by the caller; may be
   * NULL when only the last row is wanted, then `out_last_logits` [n_vocab] is written if non-NULL). */
  loom_status (*model_append)(void *context, loom_host_model_t *model, uint64_t seq_id, const int32_t *tokens,
                              uint32_t n_tokens, float *out_logits, float *out_last_logits);
  /* Keep only the first `n_keep` tokens of the sequence (KV rollback after rejected drafts). */
  loom_status (*model_truncate)(void *context, loom_host_model_t *model, uint64_t seq_id, uint32_t n_keep);
  /* Forget the sequence and free its KV memory. */
  void (*model_release)(void *context, loom_host_model_t *model, uint64_t seq_id);
  /* Last error message for this thread's most recent failing call above; valid until the next call. */
  const char *(*last_error)(void *context);
} loom_host_services;

/* ---------------------------------------------------------------------------------------------
 * The descriptor a plugin returns from loom_plugin_query. Static storage: it and every string and
 * table it points to live as long as the library stays loaded.
 * ------------------------------------------------------------------------------------------- */
typedef struct loom_plugin_desc {
  uint32_t struct_size;
  uint32_t abi_major; /* the ABI version the plugin speaks */
  uint32_t abi_minor;
  loom_plugin_kind kind;
  const char *name;        /* short unique name, e.g. "cpu" */
  const char *version;     /* the plugin's own version, e.g. "0.1.0" */
  const char *description; /* one line for `loom plugins` */
  /* The kind's function table: loom_backend_i, loom_kv_i, loom_quantizer_i, loom_sampler_i or
   * loom_drafter_i. It starts with its own struct_size. */
  const void *table;
} loom_plugin_desc;

typedef struct loom_host_version {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t reserved;
} loom_host_version;

/* The entry point. Called once per load, from one thread, before anything else.
 * On success writes a pointer to the plugin's static descriptor. A plugin that cannot speak any ABI
 * the host offers returns LOOM_STATUS_VERSION_MISMATCH and may still write its descriptor so that the
 * host can tell the user which version the plugin wanted. */
typedef loom_status (*loom_plugin_query_fn)(const loom_host_version *host, const loom_plugin_desc **out_desc);

/* Plugins declare their entry point with this, e.g.
 *   LOOM_PLUGIN_ENTRY(loom_plugin_query) { ... } */
#ifdef __cplusplus
#define LOOM_PLUGIN_ENTRY_DECL extern "C" LOOM_EXPORT
#else
#define LOOM_PLUGIN_ENTRY_DECL LOOM_EXPORT
#endif

/* Size of the fixed error buffer that `create` slots fill when they fail (they have no handle yet). */
#define LOOM_ERROR_BUFFER_SIZE 512

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOM_ABI_H */
