/*
 * loom/kv.h — the KV block allocator kind (LOOM_PLUGIN_KIND_KV).
 *
 * The allocator does bookkeeping only (nano-vllm's block manager): a pool of fixed-size blocks,
 * one block table per sequence, reference counts, sharing between sequences (fork, prefix cache),
 * copy-on-write and free-block accounting. It never touches KV memory itself: when a shared,
 * partially filled block must be copied before a write, it reports the copy and the core performs
 * it on the backend (copy_buffer) before the next forward pass.
 *
 * Threading: an allocator instance is externally synchronised (the scheduler owns it).
 */
#ifndef LOOM_KV_H
#define LOOM_KV_H

#include "loom/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_kv loom_kv_t;

typedef struct loom_kv_stats {
  uint32_t struct_size;
  uint32_t n_blocks;        /* pool size */
  uint32_t block_size;      /* tokens per block */
  uint32_t n_free;          /* blocks allocatable now (includes evictable cached blocks) */
  uint32_t n_used;          /* blocks referenced by at least one sequence */
  uint32_t n_cached;        /* unreferenced blocks kept for prefix reuse */
  uint32_t n_seqs;
  uint64_t prefix_queries;  /* full blocks looked up in the prefix cache */
  uint64_t prefix_hits;     /* of those, found */
  uint64_t tokens_reused;   /* prompt tokens whose prefill was skipped */
  /* (ABI 1.6; written only when struct_size covers them) */
  uint32_t n_state_slots;   /* per-sequence state slots configured (0 = none) */
  uint32_t n_state_free;    /* of those, not held by a sequence */
  /* (ABI 1.7; written only when struct_size covers them) */
  uint32_t n_state_checkpoints;  /* checkpoint slots configured (0 = none) */
  uint32_t n_checkpoints_held;   /* of those, holding the state at the end of a cached block */
} loom_kv_stats;

/* (ABI 1.6) A recurrent state the core must copy before the next forward pass (seq_fork). */
typedef struct loom_kv_state_copy {
  uint32_t struct_size;
  int32_t src_slot;
  int32_t dst_slot;
} loom_kv_state_copy;

typedef struct loom_kv_block_copy {
  uint32_t struct_size;
  int32_t src_block;
  int32_t dst_block;
  uint32_t n_tokens; /* tokens of the block to copy (from its start) */
} loom_kv_block_copy;

/* (ABI 1.4) Prefix-cache events, as vLLM publishes them for KV-aware routers: a full block became
 * reusable (registered under its chained hash) or stopped being reusable (evicted), or the whole
 * cache was dropped. Hashes are the allocator's own chained block hashes: equal hashes mean equal
 * token prefixes. */
typedef int32_t loom_kv_event_type;
#define LOOM_KV_EVENT_BLOCK_STORED 1
#define LOOM_KV_EVENT_BLOCK_REMOVED 2
#define LOOM_KV_EVENT_ALL_BLOCKS_CLEARED 3

typedef struct loom_kv_event {
  uint32_t struct_size;
  loom_kv_event_type type;
  uint64_t block_hash;    /* STORED, REMOVED */
  uint64_t parent_hash;   /* STORED: the previous block's hash; meaningful when has_parent */
  uint32_t has_parent;    /* STORED: 0 for a sequence's first block */
  uint32_t n_tokens;      /* STORED: the block's tokens (block_size) */
  const int32_t *tokens;  /* STORED: borrowed for the duration of the callback */
  /* (ABI 1.16; read only when struct_size covers it) STORED: the cache key the block was registered
   * under (seq_create_keyed's), 0 for the base model's cache: routers key a LoRA adapter's blocks apart. */
  uint64_t cache_key;
} loom_kv_event;

/* Called synchronously from inside the allocator's own calls (seq_create, seq_append, seq_free,
 * ...), on the thread that made them; must not call back into the allocator. */
typedef void (*loom_kv_event_fn)(void *user, const loom_kv_event *events, uint32_t n_events);

/* config_json: {"n_blocks": N, "block_size": 16, "prefix_caching": true, "n_state_slots": 0,
 *               "n_state_checkpoints": 0}
 *
 * State slots (ABI 1.6) serve models with recurrent layers (Gated DeltaNet, Mamba): each sequence's
 * state has a fixed size however long it grows, so it lives in one slot of a pool the core owns.
 * With "n_state_slots": N > 0 every sequence holds exactly one slot from seq_create to seq_free:
 * seq_create answers OUT_OF_MEMORY (allocating nothing) when no slot is free, seq_fork gives dst a
 * slot of its own and queues a state copy, and seq_free returns the slot. seq_truncate keeps the
 * blocks' bookkeeping only, so rolling back tokens is the core's to refuse.
 *
 * A recurrent state summarises a whole prefix and cannot be cut back to a block boundary, so a
 * cached block is only worth reusing where the state at its end was kept. State checkpoints (ABI
 * 1.7, "n_state_checkpoints": M > 0, only beside state slots) are M more slots of the core's pool,
 * numbered N..N+M-1 after the sequences' slots. The core calls seq_checkpoint_state when a
 * sequence's state covers exactly its first n tokens, n a multiple of the block size (the allocator
 * then queues a copy of the state into a checkpoint slot and attaches it to the block ending at n);
 * seq_create then reuses cached blocks only up to the deepest one holding a checkpoint, and queues
 * a copy of that checkpoint into the new sequence's slot. A checkpoint lives as long as its block's
 * registration, and the least recently used one is recycled when all M are held. Without
 * checkpoints (M = 0, or an allocator of ABI 1.6) an allocator with state slots reuses no cached
 * prefix (seq_create reports 0 cached tokens and blocks_needed counts every block). An allocator of
 * ABI < 1.6 ignores "n_state_slots" and one of ABI 1.6 "n_state_checkpoints": the core checks
 * struct_size before sending them. */
typedef struct loom_kv_i {
  uint32_t struct_size;
  uint32_t reserved;

  loom_status (*create)(const loom_host_services *host, const char *config_json, loom_kv_t **out, char *error,
                        uint32_t error_size);
  void (*destroy)(loom_kv_t *kv);
  /* Last failure message on this instance; valid until the next call. Must not be NULL. */
  const char *(*last_error)(loom_kv_t *kv);
  loom_status (*get_stats)(loom_kv_t *kv, loom_kv_stats *out);

  /* Blocks a new sequence with this prompt would need now, after prefix-cache hits. */
  loom_status (*blocks_needed)(loom_kv_t *kv, const int32_t *tokens, uint32_t n_tokens, uint32_t *out_blocks);
  /* Create sequence `seq_id` holding `tokens` (borrowed). Reuses cached full blocks of an equal
   * prefix and reports how many leading tokens already have KV (*out_n_cached, a multiple of the
   * block size, always < n_tokens so at least one token is computed). OUT_OF_MEMORY leaves nothing
   * allocated. */
  loom_status (*seq_create)(loom_kv_t *kv, uint64_t seq_id, const int32_t *tokens, uint32_t n_tokens,
                            uint32_t *out_n_cached);
  /* Append tokens to a sequence, allocating blocks as needed; a full block becomes cacheable. */
  loom_status (*seq_append)(loom_kv_t *kv, uint64_t seq_id, const int32_t *tokens, uint32_t n_tokens);
  /* Keep the first n_keep tokens (rollback of rejected draft tokens). */
  loom_status (*seq_truncate)(loom_kv_t *kv, uint64_t seq_id, uint32_t n_keep);
  /* New sequence `dst` sharing every block of `src` (reference counted; copy on write). */
  loom_status (*seq_fork)(loom_kv_t *kv, uint64_t src_seq_id, uint64_t dst_seq_id);
  /* Drop the sequence; its full blocks stay in the prefix cache until evicted (LRU). */
  loom_status (*seq_free)(loom_kv_t *kv, uint64_t seq_id);
  /* The sequence's block table into `out` (capacity `cap`), its length into *out_n. */
  loom_status (*seq_block_table)(loom_kv_t *kv, uint64_t seq_id, int32_t *out, uint32_t cap, uint32_t *out_n);
  /* Number of tokens the sequence holds. */
  loom_status (*seq_length)(loom_kv_t *kv, uint64_t seq_id, uint32_t *out_n_tokens);
  /* Copies the core must perform before the next forward pass (copy-on-write), then forgotten. */
  loom_status (*take_pending_copies)(loom_kv_t *kv, loom_kv_block_copy *out, uint32_t cap, uint32_t *out_n);

  /* ---- ABI 1.4 (present when struct_size covers it; NULL = the allocator publishes no events) ---- */
  /* Deliver prefix-cache events to `fn` (NULL stops them). Blocks registered before the call are
   * announced at once as BLOCK_STORED, so a subscriber starts from the allocator's real state. */
  loom_status (*set_event_sink)(loom_kv_t *kv, loom_kv_event_fn fn, void *user);

  /* ---- ABI 1.6 (present when struct_size covers them) ---- */
  /* The state slot sequence `seq_id` holds (0..n_state_slots-1); UNSUPPORTED without state slots. */
  loom_status (*seq_state_slot)(loom_kv_t *kv, uint64_t seq_id, int32_t *out_slot);
  /* State copies the core must perform before the next forward pass (from seq_fork), then forgotten. */
  loom_status (*take_pending_state_copies)(loom_kv_t *kv, loom_kv_state_copy *out, uint32_t cap, uint32_t *out_n);

  /* ---- ABI 1.7 (present when struct_size covers it) ---- */
  /* The state in sequence `seq_id`'s slot now summarises exactly its first n_tokens tokens
   * (0 < n_tokens <= its length, a multiple of the block size): keep a copy for prefix reuse. Queues
   * a state copy into a checkpoint slot attached to the registered block a lookup of those tokens
   * reaches (the sequence's own, or the one that registered the same content first), and answers OK
   * without doing anything when no such block is registered (prefix caching off, an evicted
   * prefix) or it already holds a checkpoint. UNSUPPORTED without checkpoints configured; INVALID_ARGUMENT for an
   * n_tokens off a block boundary or past the sequence. */
  loom_status (*seq_checkpoint_state)(loom_kv_t *kv, uint64_t seq_id, uint32_t n_tokens);

  /* ---- ABI 1.16 (present when struct_size covers them) ---- */
  /* blocks_needed and seq_create for a prefix cache keyed by `cache_key` as well as the tokens:
   * blocks registered by sequences of one key are reused only by sequences of the same key (the KV of
   * a run-time LoRA adapter differs from the base model's for the same tokens), and their event hashes
   * differ too. cache_key 0 is blocks_needed's and seq_create's own cache. An allocator without these
   * slots can only serve adapters with prefix caching off (the core refuses otherwise). */
  loom_status (*blocks_needed_keyed)(loom_kv_t *kv, const int32_t *tokens, uint32_t n_tokens, uint64_t cache_key,
                                     uint32_t *out_blocks);
  loom_status (*seq_create_keyed)(loom_kv_t *kv, uint64_t seq_id, const int32_t *tokens, uint32_t n_tokens,
                                  uint64_t cache_key, uint32_t *out_n_cached);
} loom_kv_i;

#ifdef __cplusplus
}
#endif

#endif /* LOOM_KV_H */
