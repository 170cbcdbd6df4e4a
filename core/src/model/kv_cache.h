// KvCache — the paged K/V pool of one model on one backend: for every attention layer a K and a V
// tensor [head_dim, n_kv_heads, n_blocks * block_size]; for every recurrent layer of a hybrid model
// a pool of per-sequence states instead (short-conv state [d_conv - 1, conv_dim, n_state_slots] and
// delta-rule state [d_k, d_v, n_v_heads, n_state_slots]). It holds memory only; which blocks and
// which state slot belong to which sequence is decided outside (KV allocator plugin, or Session).
//
// Window rings: a sliding-window layer needs only the keys of its last window, so with rings its K/V
// tensors hold n_state_slots rings of window_ring_blocks blocks instead of the block pool, one per
// state slot (the sequence's, like a recurrent state). Position p of the sequence in slot s lives in
// ring block s * R + (p / block_size) % R at offset p % block_size: a new block overwrites the one
// R blocks back. A forward pass writes rows [c, c + n) before it reads keys from c - window + 1, so
// nothing it reads is overwritten while R * block_size >= window + n - 1 (window_ring_blocks in engine/kv_plan.h);
// the model refuses a batch with more rows of one sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace loom {

class KvCache {
 public:
  KvCache() = default;
  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;

  uint32_t n_blocks() const { return n_blocks_; }
  uint32_t block_size() const { return block_size_; }
  uint64_t n_slots() const { return uint64_t{n_blocks_} * block_size_; }
  loom_dtype dtype() const { return dtype_; }
  uint64_t bytes() const { return buffer_.size(); }
  const loom_tensor& k(int32_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const loom_tensor& v(int32_t layer) const { return v_[static_cast<size_t>(layer)]; }
  uint32_t n_state_slots() const { return n_state_slots_; }
  const loom_tensor& conv_state(int32_t layer) const { return conv_state_[static_cast<size_t>(layer)]; }
  const loom_tensor& delta_state(int32_t layer) const { return delta_state_[static_cast<size_t>(layer)]; }
  uint64_t state_bytes() const { return state_buffer_.size(); }
  // Window rings (above): blocks per ring, 0 = sliding layers use the block pool like the others.
  uint32_t window_ring_blocks() const { return window_ring_blocks_; }
  bool has_window_rings() const { return window_ring_blocks_ > 0; }
  uint64_t n_window_slots() const { return uint64_t{n_state_slots_} * window_ring_blocks_ * block_size_; }
  // Changes whenever the cache's memory changes, so cached op lists know to rebuild.
  uint64_t generation() const { return generation_; }

 private:
  friend class Model;
  Buffer buffer_;
  uint32_t n_blocks_ = 0;
  uint32_t block_size_ = 0;
  loom_dtype dtype_ = LOOM_DTYPE_F16;
  std::vector<loom_tensor> k_, v_;  // [n_layers]
  Buffer state_buffer_;
  uint32_t n_state_slots_ = 0;
  uint32_t window_ring_blocks_ = 0;
  std::vector<loom_tensor> conv_state_, delta_state_;  // [n_layers]; empty views for attention layers
  uint64_t generation_ = 0;
};

}  // namespace loom
