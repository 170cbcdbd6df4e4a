// The prefix cache: full blocks registered under a hash chained over (parent hash, block tokens).
//
// A 64-bit hash finds a candidate; the candidate is then verified exactly, so a collision can never
// share the wrong KV: its stored tokens must equal the looked-up tokens, and its recorded parent
// must be the very block (same id, same registration generation) that the previous step of the
// lookup matched. By induction a hit at position i means the whole prefix of i+1 blocks is equal.
// The generation counter catches a parent that was evicted and re-registered with other content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace loom::kv {

inline constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;  // parent hash of a sequence's first block
// The first block's parent hash in the cache of `cache_key` (ABI 1.16: a LoRA adapter's blocks); kRootHash
// for key 0, the base model's.
uint64_t root_hash(uint64_t cache_key);
inline constexpr int32_t kNoBlock = -1;

// Chained block hash (splitmix64-style finalizer per token: full avalanche, cheap).
uint64_t chain_hash(uint64_t parent_hash, const int32_t* tokens, uint32_t n_tokens);

class PrefixCache {
 public:
  PrefixCache(uint32_t n_blocks, uint32_t block_size);

  // The registered block whose content is exactly `tokens` [block_size] following `parent_block`
  // (kNoBlock for the first block), or kNoBlock.
  int32_t lookup(uint64_t hash, int32_t parent_block, const int32_t* tokens) const;
  // Register a full block. Returns false (and registers nothing) when another block already holds
  // this hash: the first one stays authoritative.
  bool add(int32_t block_id, uint64_t hash, int32_t parent_block, const int32_t* tokens, uint64_t cache_key = 0);
  void remove(int32_t block_id);
  bool contains(int32_t block_id) const { return entries_[static_cast<size_t>(block_id)].is_registered; }
  uint64_t hash_of(int32_t block_id) const { return entries_[static_cast<size_t>(block_id)].hash; }
  uint64_t cache_key_of(int32_t block_id) const { return entries_[static_cast<size_t>(block_id)].cache_key; }
  // A registered block's parent (kNoBlock for a first block) and tokens.
  int32_t parent_of(int32_t block_id) const { return entries_[static_cast<size_t>(block_id)].parent_block; }
  const std::vector<int32_t>& tokens_of(int32_t block_id) const { return entries_[static_cast<size_t>(block_id)].tokens; }
  uint32_t n_blocks() const { return static_cast<uint32_t>(entries_.size()); }

 private:
  struct Entry {
    bool is_registered = false;
    uint64_t hash = 0;
    uint64_t cache_key = 0;  // the key of the cache it was registered in (ABI 1.16)
    uint64_t generation = 0;  // bumped at every registration of this block id
    int32_t parent_block = kNoBlock;
    uint64_t parent_generation = 0;
    std::vector<int32_t> tokens;
  };
  uint32_t block_size_;
  std::vector<Entry> entries_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace loom::kv
