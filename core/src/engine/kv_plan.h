// How much KV memory a model needs, per layer group, and how many sequences fit in a pool: what
// `loom plan` prints, the engine sizes its pool by, and /v1/models reports.
//
// Layers fall in groups by what their K/V must keep: full-attention layers every token of a
// sequence, sliding-window layers only the last `window` tokens, recurrent layers (hybrid models) a
// fixed state per sequence and no KV. With window rings ([kv] sliding_layers = "window", the
// default) the sliding group keeps one ring of window + chunk tokens per running sequence
// (kv_cache.h) and the block pool serves the full-attention layers alone; with "full" every
// attention layer keeps every token in the pool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/dtype.h"

namespace loom {

struct Config;
struct ModelInfo;

struct KvLayerGroup {
  std::string name;             // "full attention", "sliding window", "recurrent state"
  int32_t n_layers = 0;
  uint32_t window = 0;          // sliding window: tokens each layer attends over (0 = all)
  uint64_t bytes_per_token = 0; // K and V of one token over the group's layers (0 for recurrent)
  uint64_t bytes_per_sequence = 0;  // recurrent state of one sequence over the group's layers
};

// The groups of `info`'s layers, each once, in the order above; empty groups are left out.
std::vector<KvLayerGroup> kv_layer_groups(const ModelInfo& info, loom_dtype kv_dtype);

// Bytes one token's K and V take over all layers, as today's pool allocates them.
uint64_t kv_bytes_per_token(const ModelInfo& info, loom_dtype kv_dtype);

// How a KV budget is laid out: the block pool, and the window rings when sliding layers have them.
struct KvPoolLayout {
  uint32_t block_size = 16;
  uint64_t n_blocks = 0;            // the block pool
  uint64_t block_bytes = 0;         // one block over the layers the pool serves
  uint32_t ring_blocks = 0;         // blocks per window ring; 0 = sliding layers use the pool
  uint32_t n_rings = 0;             // one per running sequence: at most this many run at once
  uint32_t n_ring_checkpoints = 0;  // rings keeping cached prompts' windows, for prefix reuse
  uint64_t ring_bytes = 0;          // one ring over the sliding layers

  uint64_t pool_bytes() const { return n_blocks * block_bytes; }
  uint64_t rings_bytes() const { return uint64_t(n_rings + n_ring_checkpoints) * ring_bytes; }
  // Sequences of n_tokens each that fit at once (the pool's blocks, and a ring each).
  uint64_t sequences_of(uint64_t n_tokens) const;
};

struct KvPoolRequest {
  uint64_t budget_bytes = 0;
  uint32_t block_size = 16;
  uint32_t ring_blocks = 0;       // window_ring_blocks; 0 = no rings
  uint64_t typical_tokens = 0;    // automatic ring count: rings and pool balanced for sequences this long
  uint64_t max_tokens = 0;        // a sequence's longest (n_ctx): sizes the pool of a model with no full layers
  uint32_t max_seqs = 1;          // never more rings than sequences that can run
  uint32_t rings = 0;             // [kv] window_seqs: this many rings (0 = automatic)
  uint32_t checkpoints = 0;       // ring checkpoints wanted (0 = none: no prefix reuse on sliding models)
  bool rings_optional = false;    // [kv] sliding_layers = "auto": no rings when they do not fit the budget
};

// loom::Error when the budget holds no block (or not the rings asked for, unless they are optional).
KvPoolLayout plan_kv_pool(const std::vector<KvLayerGroup>& groups, const KvPoolRequest& request);

// Blocks a window ring needs so one sequence can run `max_rows` rows per forward pass (kv_cache.h),
// at most a whole context of max_tokens (0: no cap); 0 for a model without sliding layers.
uint32_t window_ring_blocks(const ModelInfo& info, uint32_t max_rows, uint32_t block_size, uint64_t max_tokens = 0);

// The pool a configuration asks for: [kv] memory (budget_bytes), block size, sliding_layers,
// window_seqs, window_chunk_tokens, checkpoints, for sequences of up to n_ctx tokens. "auto" takes
// rings only where one holds under half a context (a longer one saves little over keeping every token).
KvPoolRequest kv_pool_request(const Config& config, const ModelInfo& info, uint64_t n_ctx, uint64_t budget_bytes);

loom_dtype kv_dtype_from_name(const std::string& name);  // "f32", "int8", "q8_0", "q4_0", else f16

}  // namespace loom
