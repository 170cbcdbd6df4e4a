// How much KV memory a model needs, per layer group, and how many sequences fit in a pool: what
// `loom plan` prints, the engine sizes its pool by, and /v1/models reports.
//
// Layers fall in groups by what their K/V must keep: full-attention layers every token of a
// sequence, sliding-window layers only the last `window` tokens, recurrent layers (hybrid models) a
// fixed state per sequence and no KV. Today's allocator keeps every attention layer's K/V for every
// token, so the sliding group's need is reported twice: as allocated now, and as its window alone
// (the layer-group allocator of issue 35 would reach the second).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/dtype.h"

namespace loom {

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

// Sequences of `n_tokens` each that fit in `pool_bytes` with blocks of `block_size` tokens:
// `allocated` as today's pool keeps them (every attention layer, every token), `windowed` if sliding
// layers kept only their window plus the block being written. Recurrent state lives beside the pool
// (one slot per running sequence) and is not counted here.
struct KvFit {
  uint64_t allocated = 0;
  uint64_t windowed = 0;
};
KvFit sequences_that_fit(const std::vector<KvLayerGroup>& groups, uint64_t pool_bytes, uint32_t block_size,
                         uint64_t n_tokens);

loom_dtype kv_dtype_from_name(const std::string& name);  // "f32", "int8", "q8_0", "q4_0", else f16

}  // namespace loom
