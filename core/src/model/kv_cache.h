// KvCache — the paged K/V pool of one model on one backend: for every layer a K and a V tensor
// [head_dim, n_kv_heads, n_blocks * block_size]. It holds memory only; which blocks belong to which
// sequence is decided outside (KV allocator plugin, or Session for the single-sequence case).
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
  // Changes whenever the cache's memory changes, so cached op lists know to rebuild.
  uint64_t generation() const { return generation_; }

 private:
  friend class Model;
  Buffer buffer_;
  uint32_t n_blocks_ = 0;
  uint32_t block_size_ = 0;
  loom_dtype dtype_ = LOOM_DTYPE_F16;
  std::vector<loom_tensor> k_, v_;  // [n_layers]
  uint64_t generation_ = 0;
};

}  // namespace loom
