#include "engine/kv_plan.h"

#include <algorithm>

#include "model/model_info.h"

namespace loom {

namespace {

// One KV head's row of head_dim values.
uint64_t row_bytes(uint64_t head_dim, loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return 4ull * head_dim;
    case LOOM_DTYPE_INT8_KV: return 4ull + head_dim;  // f32 scale + int8 values
    case LOOM_DTYPE_Q8_0: return head_dim / LOOM_QK8_0 * sizeof(loom_block_q8_0);  // 34 bytes per 32 values
    case LOOM_DTYPE_Q4_0: return head_dim / LOOM_QK4_0 * sizeof(loom_block_q4_0);  // 18 bytes per 32 values
    default: return 2ull * head_dim;
  }
}

uint64_t round_up(uint64_t n, uint64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

loom_dtype kv_dtype_from_name(const std::string& name) {
  if (name == "f32") return LOOM_DTYPE_F32;
  if (name == "int8") return LOOM_DTYPE_INT8_KV;
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

KvFit sequences_that_fit(const std::vector<KvLayerGroup>& groups, uint64_t pool_bytes, uint32_t block_size,
                         uint64_t n_tokens) {
  uint64_t per_token = 0, allocated = 0, windowed = 0;
  const uint64_t blocks_tokens = round_up(std::max<uint64_t>(n_tokens, 1), block_size);
  for (const auto& g : groups) {
    per_token += g.bytes_per_token;
    windowed += g.bytes_per_token * (g.window > 0 ? std::min(blocks_tokens, round_up(g.window, block_size) + block_size)
                                                  : blocks_tokens);
  }
  allocated += per_token * blocks_tokens;
  KvFit fit;
  if (allocated > 0) fit.allocated = pool_bytes / allocated;
  if (windowed > 0) fit.windowed = pool_bytes / windowed;
  return fit;
}

}  // namespace loom
