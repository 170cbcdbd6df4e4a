#include "paged_allocator.h"

#include <algorithm>

namespace loom::kv {

namespace {
Outcome fail(loom_status status, std::string message) { return {status, std::move(message)}; }

// A take_pending_* call: the queued copies into `out` and forgotten, or OUT_OF_RANGE with nothing
// forgotten when they do not fit (*out_n says how many; the caller retries with that much room).
template <typename Copy>
Outcome hand_over(std::vector<Copy>& pending, Copy* out, uint32_t cap, uint32_t* out_n, const char* what) {
  if (out_n != nullptr) *out_n = static_cast<uint32_t>(pending.size());
  if (pending.empty()) return Outcome::ok();
  if (out == nullptr || pending.size() > cap) {
    return fail(LOOM_STATUS_OUT_OF_RANGE, std::string(what) + ": " + std::to_string(pending.size()) +
                                              " copies pending, capacity is " + std::to_string(cap));
  }
  std::copy(pending.begin(), pending.end(), out);
  pending.clear();
  return Outcome::ok();
}
}  // namespace

PagedAllocator::PagedAllocator(const AllocatorConfig& config)
    : config_(config),
      pool_(config.n_blocks),
      cache_(config.n_blocks, config.block_size),
      state_slots_(config.n_state_slots),
      checkpoints_(static_cast<int32_t>(config.n_state_slots), config.n_state_slots > 0 ? config.n_state_checkpoints : 0) {
  // A recurrent state summarises its whole prefix and cannot be cut back to a block boundary, so a
  // cached block without the state at its end is of no use: without checkpoints, no reuse with
  // state slots (loom/kv.h).
  if (state_slots_.enabled() && !checkpoints_.enabled()) config_.is_prefix_caching = false;
  // Reusing a cached block for new content drops its old registration first.
  pool_.on_evict = [this](int32_t block_id) { unregister(block_id); };
}

loom_kv_stats PagedAllocator::stats() const {
  loom_kv_stats s{};
  s.struct_size = sizeof(loom_kv_stats);
  s.n_blocks = pool_.n_blocks();
  s.block_size = config_.block_size;
  s.n_free = pool_.n_free();
  s.n_used = pool_.n_used();
  s.n_cached = pool_.n_cached();
  s.n_seqs = static_cast<uint32_t>(seqs_.size());
  s.prefix_queries = n_prefix_queries_;
  s.prefix_hits = n_prefix_hits_;
  s.tokens_reused = n_tokens_reused_;
  s.n_state_slots = state_slots_.n_slots();
  s.n_state_free = state_slots_.n_free();
  s.n_state_checkpoints = checkpoints_.n_slots();
  s.n_checkpoints_held = checkpoints_.n_held();
  return s;
}

std::vector<int32_t> PagedAllocator::registered_chain(const int32_t* tokens, uint32_t n_blocks, uint64_t root,
                                                     uint32_t* n_queries) const {
  const uint32_t bs = config_.block_size;
  std::vector<int32_t> chain;
  uint64_t parent_hash = root;
  int32_t parent_block = kNoBlock;
  for (uint32_t i = 0; i < n_blocks; ++i) {
    const int32_t* block_tokens = tokens + static_cast<size_t>(i) * bs;
    const uint64_t hash = chain_hash(parent_hash, block_tokens, bs);
    if (n_queries != nullptr) ++*n_queries;
    const int32_t block_id = cache_.lookup(hash, parent_block, block_tokens);
    if (block_id == kNoBlock) break;
    chain.push_back(block_id);
    parent_hash = hash;
    parent_block = block_id;
  }
  return chain;
}

PagedAllocator::PrefixMatch PagedAllocator::match_prefix(const int32_t* tokens, uint32_t n_tokens, uint64_t root) const {
  PrefixMatch match;
  if (!config_.is_prefix_caching || n_tokens == 0) return match;
  // Only blocks that end strictly before the last token: at least one token is always computed
  // (its logits are needed), so a prompt that is entirely cached still recomputes its last block.
  match.blocks = registered_chain(tokens, (n_tokens - 1) / config_.block_size, root, &match.n_queries);
  for (int32_t block_id : match.blocks) {
    if (pool_.ref_count(block_id) == 0) ++match.n_revived;
  }
  if (state_slots_.enabled()) {
    // A recurrent state can only resume where it was kept: cut the hit back to the deepest block
    // holding a checkpoint.
    while (!match.blocks.empty() && !checkpoints_.slot_of(match.blocks.back())) {
      if (pool_.ref_count(match.blocks.back()) == 0) --match.n_revived;
      match.blocks.pop_back();
    }
    if (!match.blocks.empty()) match.state_checkpoint = *checkpoints_.slot_of(match.blocks.back());
  }
  return match;
}

uint32_t PagedAllocator::blocks_needed(const int32_t* tokens, uint32_t n_tokens, uint64_t cache_key) const {
  const PrefixMatch match = match_prefix(tokens, n_tokens, root_hash(cache_key));
  return blocks_for(n_tokens) - static_cast<uint32_t>(match.blocks.size()) + match.n_revived;
}

void PagedAllocator::on_block_full(Sequence& seq, size_t index) {
  const uint32_t bs = config_.block_size;
  const int32_t* block_tokens = seq.tokens.data() + index * bs;
  const uint64_t parent_hash = index == 0 ? seq.root : seq.full_block_hashes[index - 1];
  const uint64_t hash = chain_hash(parent_hash, block_tokens, bs);
  seq.full_block_hashes.push_back(hash);
  if (!config_.is_prefix_caching) return;
  const int32_t parent_block = index == 0 ? kNoBlock : seq.blocks[index - 1];
  // A chain is only reachable through registered parents; an unregistered parent ends it here.
  if (parent_block != kNoBlock && (!cache_.contains(parent_block) || cache_.hash_of(parent_block) != parent_hash)) {
    return;
  }
  const bool is_new = !cache_.contains(seq.blocks[index]);
  if (cache_.add(seq.blocks[index], hash, parent_block, block_tokens, seq.cache_key) && is_new) emit_stored(seq.blocks[index]);
}

void PagedAllocator::emit_stored(int32_t block_id) {
  if (event_fn_ == nullptr) return;
  const int32_t parent = cache_.parent_of(block_id);
  loom_kv_event event{};
  event.struct_size = sizeof(loom_kv_event);
  event.type = LOOM_KV_EVENT_BLOCK_STORED;
  event.block_hash = cache_.hash_of(block_id);
  event.has_parent = parent != kNoBlock ? 1u : 0u;
  event.parent_hash = parent != kNoBlock ? cache_.hash_of(parent) : 0;
  event.n_tokens = static_cast<uint32_t>(cache_.tokens_of(block_id).size());
  event.tokens = cache_.tokens_of(block_id).data();
  event.cache_key = cache_.cache_key_of(block_id);
  event_fn_(event_user_, &event, 1);
}

void PagedAllocator::unregister(int32_t block_id) {
  if (!cache_.contains(block_id)) return;
  if (event_fn_ != nullptr) {
    loom_kv_event event{};
    event.struct_size = sizeof(loom_kv_event);
    event.type = LOOM_KV_EVENT_BLOCK_REMOVED;
    event.block_hash = cache_.hash_of(block_id);
    event_fn_(event_user_, &event, 1);
  }
  cache_.remove(block_id);
  checkpoints_.detach(block_id);  // the state at its end belongs to content it no longer holds
}

void PagedAllocator::set_event_sink(loom_kv_event_fn fn, void* user) {
  event_fn_ = fn;
  event_user_ = user;
  if (fn == nullptr) return;
  // Announce what is already cached, each block after its parent (a registered block's parent is
  // registered: removing a parent never leaves a reachable child, but its entry may linger, so
  // every block is visited once and parents first).
  std::vector<uint8_t> announced(cache_.n_blocks(), 0);
  std::vector<int32_t> chain;
  for (int32_t id = 0; id < static_cast<int32_t>(cache_.n_blocks()); ++id) {
    for (int32_t b = id; b != kNoBlock && cache_.contains(b) && !announced[static_cast<size_t>(b)]; b = cache_.parent_of(b)) {
      chain.push_back(b);
      announced[static_cast<size_t>(b)] = 1;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) emit_stored(*it);
    chain.clear();
  }
}

void PagedAllocator::release(int32_t block_id) {
  if (pool_.decref(block_id, cache_.contains(block_id)) == 0) {
    // A copy into a block nobody holds any more is pointless and would race with its next owner.
    std::erase_if(pending_copies_, [&](const loom_kv_block_copy& c) { return c.dst_block == block_id; });
  }
}

Outcome PagedAllocator::not_found(uint64_t seq_id) const {
  return fail(LOOM_STATUS_NOT_FOUND, "unknown sequence " + std::to_string(seq_id));
}

Outcome PagedAllocator::seq_create(uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens,
                                   uint32_t* out_n_cached, uint64_t cache_key) {
  if (seqs_.count(seq_id) != 0) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "sequence " + std::to_string(seq_id) + " already exists");
  }
  if (tokens == nullptr && n_tokens > 0) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "seq_create: tokens is NULL but n_tokens is " + std::to_string(n_tokens));
  }
  const PrefixMatch match = match_prefix(tokens, n_tokens, root_hash(cache_key));
  const uint32_t n_hits = static_cast<uint32_t>(match.blocks.size());
  const uint32_t n_new = blocks_for(n_tokens) - n_hits;
  if (static_cast<uint64_t>(n_new) + match.n_revived > pool_.n_free()) {
    return fail(LOOM_STATUS_OUT_OF_MEMORY, "seq_create: sequence " + std::to_string(seq_id) + " needs " +
                                               std::to_string(n_new + match.n_revived) + " blocks, " +
                                               std::to_string(pool_.n_free()) + " free");
  }
  if (state_slots_.enabled() && state_slots_.n_free() == 0) {
    return fail(LOOM_STATUS_OUT_OF_MEMORY, "seq_create: sequence " + std::to_string(seq_id) + " needs a state slot, all " +
                                               std::to_string(state_slots_.n_slots()) + " are held");
  }
  Sequence seq;
  seq.root = root_hash(cache_key);
  seq.cache_key = cache_key;
  seq.tokens.assign(tokens, tokens + n_tokens);
  if (state_slots_.enabled()) seq.state_slot = state_slots_.take();
  // Revive hits before allocating, so eviction can never pick a block we are about to share.
  for (int32_t block_id : match.blocks) {
    pool_.incref(block_id);
    seq.blocks.push_back(block_id);
  }
  for (uint32_t i = 0; i < n_new; ++i) seq.blocks.push_back(pool_.allocate());
  const uint32_t bs = config_.block_size;
  for (size_t i = 0; i < n_tokens / bs; ++i) {
    if (i < n_hits) {
      seq.full_block_hashes.push_back(cache_.hash_of(seq.blocks[i]));
    } else {
      on_block_full(seq, i);
    }
  }
  n_prefix_queries_ += match.n_queries;
  n_prefix_hits_ += n_hits;
  n_tokens_reused_ += static_cast<uint64_t>(n_hits) * bs;
  if (out_n_cached != nullptr) *out_n_cached = n_hits * bs;
  if (match.state_checkpoint >= 0) {
    // The new sequence resumes from the state kept at its last reused block.
    pending_state_copies_.push_back({sizeof(loom_kv_state_copy), match.state_checkpoint, seq.state_slot});
    checkpoints_.touch(match.blocks.back());
  }
  seqs_.emplace(seq_id, std::move(seq));
  return Outcome::ok();
}

Outcome PagedAllocator::seq_append(uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  if (tokens == nullptr && n_tokens > 0) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "seq_append: tokens is NULL but n_tokens is " + std::to_string(n_tokens));
  }
  if (n_tokens == 0) return Outcome::ok();
  Sequence& seq = it->second;
  const uint32_t bs = config_.block_size;
  const uint64_t old_len = seq.tokens.size();
  const bool is_partial_tail = old_len % bs != 0;
  const bool needs_cow = is_partial_tail && pool_.ref_count(seq.blocks.back()) > 1;
  const uint64_t n_new = blocks_for(old_len + n_tokens) - seq.blocks.size() + (needs_cow ? 1 : 0);
  if (n_new > pool_.n_free()) {
    return fail(LOOM_STATUS_OUT_OF_MEMORY, "seq_append: sequence " + std::to_string(seq_id) + " needs " +
                                               std::to_string(n_new) + " blocks, " +
                                               std::to_string(pool_.n_free()) + " free");
  }
  if (needs_cow) {
    const int32_t src = seq.blocks.back();
    const int32_t dst = pool_.allocate();
    pending_copies_.push_back({sizeof(loom_kv_block_copy), src, dst, static_cast<uint32_t>(old_len % bs)});
    release(src);
    seq.blocks.back() = dst;
  } else if (is_partial_tail && cache_.contains(seq.blocks.back())) {
    // Only we hold it and we are about to overwrite its tail: its registered content goes stale.
    unregister(seq.blocks.back());
  }
  for (uint32_t i = 0; i < n_tokens; ++i) {
    if (seq.tokens.size() % bs == 0) seq.blocks.push_back(pool_.allocate());
    seq.tokens.push_back(tokens[i]);
    if (seq.tokens.size() % bs == 0) on_block_full(seq, seq.blocks.size() - 1);
  }
  return Outcome::ok();
}

Outcome PagedAllocator::seq_truncate(uint64_t seq_id, uint32_t n_keep) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  Sequence& seq = it->second;
  if (n_keep > seq.tokens.size()) {
    return fail(LOOM_STATUS_OUT_OF_RANGE, "seq_truncate: n_keep " + std::to_string(n_keep) + " exceeds the " +
                                              std::to_string(seq.tokens.size()) + " tokens of sequence " +
                                              std::to_string(seq_id));
  }
  const uint32_t bs = config_.block_size;
  const uint32_t n_keep_blocks = blocks_for(n_keep);
  // Release from the tail so the deepest blocks are the first evicted.
  while (seq.blocks.size() > n_keep_blocks) {
    release(seq.blocks.back());
    seq.blocks.pop_back();
  }
  seq.tokens.resize(n_keep);
  seq.full_block_hashes.resize(n_keep / bs);
  if (n_keep % bs != 0) {
    const int32_t tail = seq.blocks.back();
    // A full block that became partial will be overwritten by this sequence; when nobody else holds
    // it, its cache entry must go now (a shared one stays: the sharers still hold the full content,
    // and our next append copies on write).
    if (cache_.contains(tail) && pool_.ref_count(tail) == 1) unregister(tail);
  }
  return Outcome::ok();
}

Outcome PagedAllocator::seq_fork(uint64_t src_seq_id, uint64_t dst_seq_id) {
  auto it = seqs_.find(src_seq_id);
  if (it == seqs_.end()) return not_found(src_seq_id);
  if (seqs_.count(dst_seq_id) != 0) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "seq_fork: sequence " + std::to_string(dst_seq_id) + " already exists");
  }
  if (state_slots_.enabled() && state_slots_.n_free() == 0) {
    return fail(LOOM_STATUS_OUT_OF_MEMORY, "seq_fork: sequence " + std::to_string(dst_seq_id) + " needs a state slot, all " +
                                               std::to_string(state_slots_.n_slots()) + " are held");
  }
  Sequence copy = it->second;
  for (int32_t block_id : copy.blocks) pool_.incref(block_id);
  if (state_slots_.enabled()) {
    copy.state_slot = state_slots_.take();
    pending_state_copies_.push_back({sizeof(loom_kv_state_copy), it->second.state_slot, copy.state_slot});
  }
  seqs_.emplace(dst_seq_id, std::move(copy));
  return Outcome::ok();
}

Outcome PagedAllocator::seq_free(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) release(*b);
  if (const int32_t slot = it->second.state_slot; slot >= 0) {
    // A copy into or out of a slot that is no longer held is pointless (and would race with its next owner).
    std::vector<int32_t> lost_checkpoints;  // checkpoint slots whose state was to come from this one
    std::erase_if(pending_state_copies_, [&](const loom_kv_state_copy& c) {
      if (c.src_slot == slot && c.dst_slot >= static_cast<int32_t>(state_slots_.n_slots())) lost_checkpoints.push_back(c.dst_slot);
      return c.dst_slot == slot || c.src_slot == slot;
    });
    for (int32_t checkpoint : lost_checkpoints) {
      const bool refilled = std::any_of(pending_state_copies_.begin(), pending_state_copies_.end(),
                                        [&](const loom_kv_state_copy& c) { return c.dst_slot == checkpoint; });
      if (auto block = checkpoints_.block_of_slot(checkpoint); block && !refilled) checkpoints_.detach(*block);
    }
    state_slots_.give_back(slot);
  }
  seqs_.erase(it);
  return Outcome::ok();
}

Outcome PagedAllocator::seq_block_table(uint64_t seq_id, int32_t* out, uint32_t cap, uint32_t* out_n) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  const std::vector<int32_t>& blocks = it->second.blocks;
  if (out_n != nullptr) *out_n = static_cast<uint32_t>(blocks.size());
  if (blocks.size() > cap || (out == nullptr && !blocks.empty())) {
    return fail(LOOM_STATUS_OUT_OF_RANGE, "seq_block_table: sequence " + std::to_string(seq_id) + " has " +
                                              std::to_string(blocks.size()) + " blocks, capacity is " +
                                              std::to_string(cap));
  }
  std::copy(blocks.begin(), blocks.end(), out);
  return Outcome::ok();
}

Outcome PagedAllocator::seq_length(uint64_t seq_id, uint32_t* out_n_tokens) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  if (out_n_tokens == nullptr) return fail(LOOM_STATUS_INVALID_ARGUMENT, "seq_length: out_n_tokens is NULL");
  *out_n_tokens = static_cast<uint32_t>(it->second.tokens.size());
  return Outcome::ok();
}

Outcome PagedAllocator::take_pending_copies(loom_kv_block_copy* out, uint32_t cap, uint32_t* out_n) {
  return hand_over(pending_copies_, out, cap, out_n, "take_pending_copies");
}

Outcome PagedAllocator::seq_state_slot(uint64_t seq_id, int32_t* out_slot) const {
  if (!state_slots_.enabled()) return fail(LOOM_STATUS_UNSUPPORTED, "seq_state_slot: the allocator has no state slots (n_state_slots is 0)");
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  if (out_slot == nullptr) return fail(LOOM_STATUS_INVALID_ARGUMENT, "seq_state_slot: out_slot is NULL");
  *out_slot = it->second.state_slot;
  return Outcome::ok();
}

Outcome PagedAllocator::take_pending_state_copies(loom_kv_state_copy* out, uint32_t cap, uint32_t* out_n) {
  return hand_over(pending_state_copies_, out, cap, out_n, "take_pending_state_copies");
}

Outcome PagedAllocator::seq_checkpoint_state(uint64_t seq_id, uint32_t n_tokens) {
  if (!checkpoints_.enabled()) {
    return fail(LOOM_STATUS_UNSUPPORTED, "seq_checkpoint_state: the allocator keeps no state checkpoints (n_state_checkpoints is 0)");
  }
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return not_found(seq_id);
  Sequence& seq = it->second;
  const uint32_t bs = config_.block_size;
  if (n_tokens == 0 || n_tokens % bs != 0 || n_tokens > seq.tokens.size()) {
    return fail(LOOM_STATUS_INVALID_ARGUMENT, "seq_checkpoint_state: n_tokens " + std::to_string(n_tokens) +
                                                  " is not a block boundary within the " + std::to_string(seq.tokens.size()) +
                                                  " tokens of sequence " + std::to_string(seq_id));
  }
  // The block a later lookup of these tokens reaches: this sequence's own, or, when another block
  // registered the same content first, that one (equal tokens give an equal state).
  const std::vector<int32_t> chain = registered_chain(seq.tokens.data(), n_tokens / bs, seq.root, nullptr);
  if (chain.size() != n_tokens / bs) return Outcome::ok();
  const int32_t block_id = chain.back();
  if (checkpoints_.slot_of(block_id)) return Outcome::ok();
  const int32_t slot = checkpoints_.attach(block_id);
  pending_state_copies_.push_back({sizeof(loom_kv_state_copy), seq.state_slot, slot});
  return Outcome::ok();
}

}  // namespace loom::kv
