#include "prefix_cache.h"

#include <algorithm>

namespace loom::kv {

namespace {
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
}  // namespace

uint64_t root_hash(uint64_t cache_key) { return cache_key == 0 ? kRootHash : mix64(kRootHash ^ mix64(cache_key)); }

uint64_t chain_hash(uint64_t parent_hash, const int32_t* tokens, uint32_t n_tokens) {
  uint64_t h = mix64(parent_hash ^ (0x2545f4914f6cdd1dull * (n_tokens + 1)));
  for (uint32_t i = 0; i < n_tokens; ++i) {
    // Position-dependent input so permutations of the same tokens hash differently.
    h = mix64(h ^ mix64(static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ull * (i + 1)));
  }
  return h;
}

PrefixCache::PrefixCache(uint32_t n_blocks, uint32_t block_size) : block_size_(block_size), entries_(n_blocks) {}

int32_t PrefixCache::lookup(uint64_t hash, int32_t parent_block, const int32_t* tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return kNoBlock;
  const Entry& entry = entries_[static_cast<size_t>(it->second)];
  if (entry.parent_block != parent_block) return kNoBlock;
  if (parent_block != kNoBlock) {
    const Entry& parent = entries_[static_cast<size_t>(parent_block)];
    if (!parent.is_registered || parent.generation != entry.parent_generation) return kNoBlock;
  }
  if (!std::equal(entry.tokens.begin(), entry.tokens.end(), tokens)) return kNoBlock;
  return it->second;
}

bool PrefixCache::add(int32_t block_id, uint64_t hash, int32_t parent_block, const int32_t* tokens, uint64_t cache_key) {
  Entry& entry = entries_[static_cast<size_t>(block_id)];
  if (entry.is_registered) return entry.hash == hash;
  if (by_hash_.count(hash) != 0) return false;
  entry.is_registered = true;
  entry.hash = hash;
  entry.cache_key = cache_key;
  ++entry.generation;
  entry.parent_block = parent_block;
  entry.parent_generation =
      parent_block == kNoBlock ? 0 : entries_[static_cast<size_t>(parent_block)].generation;
  entry.tokens.assign(tokens, tokens + block_size_);
  by_hash_.emplace(hash, block_id);
  return true;
}

void PrefixCache::remove(int32_t block_id) {
  Entry& entry = entries_[static_cast<size_t>(block_id)];
  if (!entry.is_registered) return;
  by_hash_.erase(entry.hash);
  entry.is_registered = false;
  entry.tokens.clear();
}

}  // namespace loom::kv
