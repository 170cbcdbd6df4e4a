// The pool of fixed-size KV blocks: reference counts and free-block accounting.
//
// A block is in exactly one of three states:
//   used      ref_count > 0, referenced by at least one sequence;
//   free      ref_count == 0 and holds nothing worth keeping (in `free_`);
//   cached    ref_count == 0 but its full content is registered in the prefix cache, so it can
//             be revived by a hit; it is evicted (least recently released first) when a fresh
//             block is needed and `free_` is empty.
// The pool does not know about hashes: it asks `on_evict` to unregister a cached block before
// reusing it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <vector>

namespace loom::kv {

class BlockPool {
 public:
  explicit BlockPool(uint32_t n_blocks);

  uint32_t n_blocks() const { return static_cast<uint32_t>(blocks_.size()); }
  // Blocks an allocation can take now: free plus evictable cached ones.
  uint32_t n_free() const { return static_cast<uint32_t>(free_.size() + lru_.size()); }
  uint32_t n_cached() const { return static_cast<uint32_t>(lru_.size()); }
  uint32_t n_used() const { return n_blocks() - n_free(); }

  uint32_t ref_count(int32_t block_id) const { return blocks_[static_cast<size_t>(block_id)].ref_count; }

  // Take a block with ref_count 1. The caller has checked n_free() first; evicts the least
  // recently released cached block when no plain free block is left.
  int32_t allocate();
  // One more reference; revives a cached block (takes it out of the eviction list).
  void incref(int32_t block_id);
  // One reference less. At zero the block becomes cached when `is_cached` says its content is
  // registered, free otherwise. Returns the new count.
  uint32_t decref(int32_t block_id, bool is_cached);
  // A cached block that lost its registration (its content is about to change or is stale).
  void uncache(int32_t block_id);

  std::function<void(int32_t block_id)> on_evict;

 private:
  struct Block {
    uint32_t ref_count = 0;
    bool is_in_lru = false;
    std::list<int32_t>::iterator lru_pos;
  };
  std::vector<Block> blocks_;
  std::deque<int32_t> free_;
  std::list<int32_t> lru_;  // cached blocks, least recently released first
};

}  // namespace loom::kv
