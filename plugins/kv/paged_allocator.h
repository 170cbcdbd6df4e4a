// The sequence table and every allocator operation, on top of BlockPool and PrefixCache.
//
// Invariants (checked by the conformance suite):
//  - a sequence of n tokens holds exactly ceil(n / block_size) blocks;
//  - a block is referenced by several sequences only after seq_fork or a prefix-cache hit, and a
//    sequence never writes into a block someone else references: appending into a shared, partially
//    filled block first moves the sequence to a fresh block and records a pending copy;
//  - a block registered in the prefix cache always holds exactly the tokens it was registered with;
//  - every operation either succeeds or changes nothing (OUT_OF_MEMORY is checked up front).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "block_pool.h"
#include "loom/kv.h"
#include "prefix_cache.h"
#include "state_checkpoints.h"
#include "state_slots.h"

namespace loom::kv {

struct AllocatorConfig {
  uint32_t n_blocks = 1024;
  uint32_t block_size = 16;
  bool is_prefix_caching = true;
  uint32_t n_state_slots = 0;  // ABI 1.6: one per sequence
  // ABI 1.7: slots keeping the state at a cached block's end; with state slots but none of these,
  // no prefix is reused (loom/kv.h).
  uint32_t n_state_checkpoints = 0;
};

// Status plus a message for last_error.
struct Outcome {
  loom_status status = LOOM_STATUS_OK;
  std::string message;
  static Outcome ok() { return {}; }
};

class PagedAllocator {
 public:
  explicit PagedAllocator(const AllocatorConfig& config);

  loom_kv_stats stats() const;
  // New blocks plus revived cached blocks: exactly how much n_free drops if seq_create succeeds now,
  // so a scheduler admits the sequence iff blocks_needed <= n_free.
  // cache_key (ABI 1.16) keys the prefix cache beside the tokens: 0 is the base model's cache.
  uint32_t blocks_needed(const int32_t* tokens, uint32_t n_tokens, uint64_t cache_key = 0) const;

  Outcome seq_create(uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens, uint32_t* out_n_cached, uint64_t cache_key = 0);
  Outcome seq_append(uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens);
  Outcome seq_truncate(uint64_t seq_id, uint32_t n_keep);
  Outcome seq_fork(uint64_t src_seq_id, uint64_t dst_seq_id);
  Outcome seq_free(uint64_t seq_id);
  Outcome seq_block_table(uint64_t seq_id, int32_t* out, uint32_t cap, uint32_t* out_n) const;
  Outcome seq_length(uint64_t seq_id, uint32_t* out_n_tokens) const;
  Outcome take_pending_copies(loom_kv_block_copy* out, uint32_t cap, uint32_t* out_n);
  // Prefix-cache events (ABI 1.4): every registration and removal from now on, after announcing the
  // blocks already registered (parents first).
  void set_event_sink(loom_kv_event_fn fn, void* user);
  // State slots (ABI 1.6).
  Outcome seq_state_slot(uint64_t seq_id, int32_t* out_slot) const;
  Outcome take_pending_state_copies(loom_kv_state_copy* out, uint32_t cap, uint32_t* out_n);
  // State checkpoints (ABI 1.7).
  Outcome seq_checkpoint_state(uint64_t seq_id, uint32_t n_tokens);

 private:
  struct Sequence {
    std::vector<int32_t> tokens;
    std::vector<int32_t> blocks;
    std::vector<uint64_t> full_block_hashes;  // chain hash of each full block, in order
    int32_t state_slot = -1;                   // with state slots configured
    uint64_t root = kRootHash;                 // its cache's first parent hash (root_hash of its key)
    uint64_t cache_key = 0;                    // its cache's key (0: the base model's)
  };
  struct PrefixMatch {
    std::vector<int32_t> blocks;  // hit blocks, in order
    uint32_t n_queries = 0;
    uint32_t n_revived = 0;       // hits on unreferenced (cached) blocks
    int32_t state_checkpoint = -1;  // with state slots: the checkpoint slot at the last hit's end
  };

  PrefixMatch match_prefix(const int32_t* tokens, uint32_t n_tokens, uint64_t root) const;
  // The registered blocks holding the first n_blocks blocks of `tokens`, as far as they go.
  std::vector<int32_t> registered_chain(const int32_t* tokens, uint32_t n_blocks, uint64_t root, uint32_t* n_queries) const;
  uint32_t blocks_for(uint64_t n_tokens) const {
    return static_cast<uint32_t>((n_tokens + config_.block_size - 1) / config_.block_size);
  }
  // The sequence's block `index` just became full: hash it and, when its parent is registered
  // under this chain, register it.
  void on_block_full(Sequence& seq, size_t index);
  void release(int32_t block_id);
  // Drop a block's registration (eviction, truncation), telling the event sink.
  void unregister(int32_t block_id);
  void emit_stored(int32_t block_id);
  Outcome not_found(uint64_t seq_id) const;

  AllocatorConfig config_;
  BlockPool pool_;
  PrefixCache cache_;
  std::unordered_map<uint64_t, Sequence> seqs_;
  std::vector<loom_kv_block_copy> pending_copies_;
  StateSlots state_slots_;
  std::vector<loom_kv_state_copy> pending_state_copies_;
  StateCheckpoints checkpoints_;
  uint64_t n_prefix_queries_ = 0;
  uint64_t n_prefix_hits_ = 0;
  uint64_t n_tokens_reused_ = 0;
  loom_kv_event_fn event_fn_ = nullptr;
  void* event_user_ = nullptr;
};

}  // namespace loom::kv
