#include "block_pool.h"

#include <cassert>

namespace loom::kv {

BlockPool::BlockPool(uint32_t n_blocks) : blocks_(n_blocks) {
  for (uint32_t i = 0; i < n_blocks; ++i) free_.push_back(static_cast<int32_t>(i));
}

int32_t BlockPool::allocate() {
  int32_t block_id = -1;
  if (!free_.empty()) {
    block_id = free_.front();
    free_.pop_front();
  } else {
    assert(!lru_.empty() && "BlockPool::allocate called with no free block");
    block_id = lru_.front();
    lru_.pop_front();
    Block& evicted = blocks_[static_cast<size_t>(block_id)];
    evicted.is_in_lru = false;
    if (on_evict) on_evict(block_id);
  }
  Block& block = blocks_[static_cast<size_t>(block_id)];
  assert(block.ref_count == 0);
  block.ref_count = 1;
  return block_id;
}

void BlockPool::incref(int32_t block_id) {
  Block& block = blocks_[static_cast<size_t>(block_id)];
  if (block.ref_count == 0) {
    assert(block.is_in_lru && "a zero-reference block can only be revived from the cache");
    lru_.erase(block.lru_pos);
    block.is_in_lru = false;
  }
  ++block.ref_count;
}

uint32_t BlockPool::decref(int32_t block_id, bool is_cached) {
  Block& block = blocks_[static_cast<size_t>(block_id)];
  assert(block.ref_count > 0);
  if (--block.ref_count == 0) {
    if (is_cached) {
      block.lru_pos = lru_.insert(lru_.end(), block_id);
      block.is_in_lru = true;
    } else {
      free_.push_back(block_id);
    }
  }
  return block.ref_count;
}

void BlockPool::uncache(int32_t block_id) {
  Block& block = blocks_[static_cast<size_t>(block_id)];
  if (!block.is_in_lru) return;
  lru_.erase(block.lru_pos);
  block.is_in_lru = false;
  free_.push_back(block_id);
}

}  // namespace loom::kv
