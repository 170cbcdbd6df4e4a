#include "engine/kv_plan.h"

#include <algorithm>

#include "common/error.h"
#include "config/config.h"
#include "model/model_info.h"

namespace loom {

namespace {

// One KV head's row of head_dim values.
uint64_t row_bytes(uint64_t head_dim, loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return 4ull * head_dim;
    case LOOM_DTYPE_INT8_KV: return 4ull + head_dim;  // f32 scale + int8 values
    case LOOM_DTYPE_F8_E4M3: return head_dim;         // one byte per value, no scale
    case LOOM_DTYPE_Q8_0: return head_dim / LOOM_QK8_0 * sizeof(loom_block_q8_0);  // 34 bytes per 32 values
    case LOOM_DTYPE_Q4_0: return head_dim / LOOM_QK4_0 * sizeof(loom_block_q4_0);  // 18 bytes per 32 values
    default: return 2ull * head_dim;
  }
}

}  // namespace

loom_dtype kv_dtype_from_name(const std::string& name) {
  if (name == "f32") return LOOM_DTYPE_F32;
  if (name == "int8") return LOOM_DTYPE_INT8_KV;
  if (name == "fp8_e4m3" || name == "fp8") return LOOM_DTYPE_F8_E4M3;
  if (name == "q8_0") return LOOM_DTYPE_Q8_0;
  if (name == "q4_0") return LOOM_DTYPE_Q4_0;
  return LOOM_DTYPE_F16;
}

std::vector<KvLayerGroup> kv_layer_groups(const ModelInfo& info, loom_dtype kv_dtype) {
  KvLayerGroup full{"full attention"}, sliding{"sliding window"}, recurrent{"recurrent state"};
  sliding.window = info.sliding_window;
  for (int32_t il = 0; il < info.n_layers; ++il) {
    if (info.is_recurrent(il)) {
      ++recurrent.n_layers;
      recurrent.bytes_per_sequence += 4ull * uint64_t(info.ssm_conv_state_size() + info.ssm_delta_state_size());
      continue;
    }
    if (!info.owns_kv(il)) continue;  // attends over an earlier layer's K/V
    const bool local = info.sliding_window > 0 && il < int32_t(info.layer_is_local.size()) && info.layer_is_local[size_t(il)];
    KvLayerGroup& group = local ? sliding : full;
    ++group.n_layers;
    group.bytes_per_token += 2ull * uint64_t(info.layer(il).n_kv_heads) * row_bytes(uint64_t(info.layer(il).head_dim), kv_dtype);
  }
  std::vector<KvLayerGroup> groups;
  for (auto* g : {&full, &sliding, &recurrent}) {
    if (g->n_layers > 0) groups.push_back(*g);
  }
  return groups;
}

uint64_t kv_bytes_per_token(const ModelInfo& info, loom_dtype kv_dtype) {
  uint64_t total = 0;
  for (const auto& g : kv_layer_groups(info, kv_dtype)) total += g.bytes_per_token;
  return total;
}

uint64_t KvPoolLayout::sequences_of(uint64_t n_tokens) const {
  const uint64_t blocks = (std::max<uint64_t>(n_tokens, 1) + block_size - 1) / block_size;
  const uint64_t by_pool = block_bytes > 0 ? n_blocks / blocks : UINT64_MAX;
  return ring_blocks > 0 ? std::min<uint64_t>(by_pool, n_rings) : by_pool;
}

uint32_t window_ring_blocks(const ModelInfo& info, uint32_t max_rows, uint32_t block_size, uint64_t max_tokens) {
  if (!info.has_sliding_layers() || block_size == 0) return 0;
  uint64_t tokens = uint64_t(info.sliding_window) + std::max<uint32_t>(max_rows, 1) - 1;
  // A ring as long as the context never wraps: no sequence needs more.
  if (max_tokens > 0) tokens = std::min(tokens, std::max<uint64_t>(max_tokens, info.sliding_window));
  return static_cast<uint32_t>((tokens + block_size - 1) / block_size);
}

KvPoolRequest kv_pool_request(const Config& config, const ModelInfo& info, uint64_t n_ctx, uint64_t budget_bytes) {
  KvPoolRequest r;
  r.budget_bytes = budget_bytes;
  r.block_size = static_cast<uint32_t>(config.kv.block_size);
  if (info.has_sliding_layers() && config.kv.sliding_layers != "full") {
    r.ring_blocks = window_ring_blocks(info, static_cast<uint32_t>(config.kv.window_chunk_tokens), r.block_size, n_ctx);
    if (config.kv.sliding_layers == "auto" && 2 * uint64_t(r.ring_blocks) * r.block_size > n_ctx) r.ring_blocks = 0;
  }
  r.rings_optional = config.kv.sliding_layers == "auto";
  r.typical_tokens = n_ctx / 4;
  r.max_tokens = n_ctx;
  r.max_seqs = static_cast<uint32_t>(config.scheduler.max_num_seqs);
  r.rings = static_cast<uint32_t>(config.kv.window_seqs);
  r.checkpoints = config.kv.prefix_caching ? static_cast<uint32_t>(config.kv.state_checkpoints) : 0;
  return r;
}

KvPoolLayout plan_kv_pool(const std::vector<KvLayerGroup>& groups, const KvPoolRequest& r) {
  KvPoolLayout layout;
  layout.block_size = r.block_size;
  uint64_t pool_per_token = 0, ring_per_token = 0;
  for (const auto& g : groups) (g.window > 0 && r.ring_blocks > 0 ? ring_per_token : pool_per_token) += g.bytes_per_token;
  layout.block_bytes = pool_per_token * r.block_size;
  uint64_t budget = r.budget_bytes;
  if (ring_per_token > 0) {
    layout.ring_blocks = r.ring_blocks;
    layout.ring_bytes = ring_per_token * r.ring_blocks * r.block_size;
    uint64_t rings = r.rings;
    if (rings == 0) {
      // Balanced for sequences of typical_tokens: each takes a ring and its blocks of the pool, and
      // the checkpoints (a quarter of the rings) come out of the same budget.
      const uint64_t per_seq = layout.ring_bytes + layout.ring_bytes / 4 + pool_per_token * r.typical_tokens;
      rings = std::clamp<uint64_t>(budget / std::max<uint64_t>(per_seq, 1), 1, std::max<uint32_t>(r.max_seqs, 1));
    }
    layout.n_rings = static_cast<uint32_t>(rings);
    layout.n_ring_checkpoints = r.checkpoints > 0 ? std::min<uint32_t>(r.checkpoints, std::max<uint32_t>(1, layout.n_rings / 4)) : 0;
    if (layout.rings_bytes() >= budget) {
      if (r.rings_optional) {
        KvPoolRequest without = r;
        without.ring_blocks = 0;
        return plan_kv_pool(groups, without);
      }
      throw Error("kv.memory of " + std::to_string(budget) + " bytes cannot hold " + std::to_string(layout.n_rings) +
                  " window rings of " + std::to_string(layout.ring_bytes) + " bytes (and " +
                  std::to_string(layout.n_ring_checkpoints) + " checkpoints) beside the block pool: raise kv.memory, " +
                  "lower kv.window_seqs, or set kv.sliding_layers = \"full\"");
    }
    budget -= layout.rings_bytes();
  }
  // A model whose every attention layer slides keeps nothing in the pool; its blocks still count
  // tokens for the allocator.
  layout.n_blocks = layout.block_bytes > 0 ? budget / layout.block_bytes
                                           : uint64_t(layout.n_rings) * ((r.max_tokens + r.block_size - 1) / r.block_size);
  if (layout.n_blocks == 0) {
    throw Error("kv.memory of " + std::to_string(budget) + " bytes holds no block of " + std::to_string(r.block_size) +
                " tokens (" + std::to_string(layout.block_bytes) + " bytes): raise kv.memory");
  }
  return layout;
}

}  // namespace loom
