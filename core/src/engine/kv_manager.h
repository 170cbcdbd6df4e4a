// KvManager — the engine's C++ face of a KV-allocator plugin instance (loom/kv.h). Bookkeeping only:
// it hands out block tables; the KV memory itself lives in the backend's KvCache.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/kv.h"

namespace loom {

class LoadedPlugin;

// One prefix-cache event of the allocator (loom_kv_event, ABI 1.4), owning its tokens.
struct KvEvent {
  loom_kv_event_type type = LOOM_KV_EVENT_BLOCK_STORED;
  uint64_t block_hash = 0;
  std::optional<uint64_t> parent_hash;  // stored blocks after the first of their sequence
  std::vector<int32_t> tokens;          // stored blocks
  uint64_t cache_key = 0;               // stored blocks: the cache they were registered in (ABI 1.16; 0 = the base model's)
  // Stored blocks of a LoRA adapter's cache: vLLM's lora_id (the adapter's position in [[lora]], from 1) and lora_name.
  std::optional<int64_t> lora_id;
  std::string lora_name;
};
using KvEventListener = std::function<void(const KvEvent&)>;

class KvManager {
 public:
  // n_state_slots > 0 (hybrid models) needs an allocator of ABI 1.6 or later: loom::Error otherwise.
  // n_state_checkpoints (ABI 1.7) is dropped to 0 for an older allocator: it then reuses no prefix.
  KvManager(std::shared_ptr<LoadedPlugin> plugin, uint32_t n_blocks, uint32_t block_size, bool prefix_caching,
            uint32_t n_state_slots = 0, uint32_t n_state_checkpoints = 0);
  ~KvManager();
  KvManager(const KvManager&) = delete;
  KvManager& operator=(const KvManager&) = delete;

  uint32_t block_size() const { return block_size_; }
  uint32_t n_blocks() const { return n_blocks_; }
  loom_kv_stats stats() const;

  // cache_key keys the prefix cache beside the tokens (a LoRA adapter's sequences: ABI 1.16); 0 is the
  // base model's cache. A key other than 0 needs keyed_prefix_cache() when prefix caching is on.
  uint32_t blocks_needed(const std::vector<int32_t>& tokens, uint64_t cache_key = 0) const;
  // Create the sequence holding `tokens`; returns how many leading tokens already have KV, or
  // nullopt when the pool is out of blocks (nothing allocated). Other failures throw loom::Error.
  std::optional<uint32_t> create(uint64_t seq_id, const std::vector<int32_t>& tokens, uint64_t cache_key = 0);
  // Whether the allocator keys its prefix cache (seq_create_keyed, ABI 1.16), or caches nothing.
  bool keyed_prefix_cache() const;
  // Append tokens; false when out of blocks (nothing appended).
  bool append(uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens);
  void truncate(uint64_t seq_id, uint32_t n_keep);
  void free(uint64_t seq_id);
  std::vector<int32_t> block_table(uint64_t seq_id) const;
  std::vector<loom_kv_block_copy> take_pending_copies();
  // The sequence's recurrent state slot (ABI 1.6; only with state slots).
  int32_t state_slot(uint64_t seq_id) const;
  std::vector<loom_kv_state_copy> take_pending_state_copies();
  uint32_t n_state_slots() const { return n_state_slots_; }
  // Keep the sequence's state, which now covers its first n_tokens (a block boundary), for prefix
  // reuse (ABI 1.7; only with checkpoints).
  void checkpoint_state(uint64_t seq_id, uint32_t n_tokens);
  uint32_t n_state_checkpoints() const { return n_state_checkpoints_; }
  // Receive the allocator's prefix-cache events (called from inside the calls above, on their
  // thread). False when the plugin has no set_event_sink (built before ABI 1.4, or it publishes
  // none): the caller then runs without events.
  bool set_event_listener(KvEventListener listener);

 private:
  [[noreturn]] void fail(loom_status status, const char* what) const;
  // Everything a take_pending_* slot of the table has queued.
  template <typename Copy>
  std::vector<Copy> take_all(loom_status (*take)(loom_kv_t*, Copy*, uint32_t, uint32_t*), const char* what);

  static void on_events(void* user, const loom_kv_event* events, uint32_t n_events);

  std::shared_ptr<LoadedPlugin> plugin_;
  KvEventListener listener_;
  const loom_kv_i* table_ = nullptr;
  loom_kv_t* kv_ = nullptr;
  uint32_t n_blocks_ = 0;
  uint32_t block_size_ = 0;
  uint32_t n_state_slots_ = 0;
  uint32_t n_state_checkpoints_ = 0;
  bool prefix_caching_ = false;
};

}  // namespace loom
