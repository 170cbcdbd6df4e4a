#include "engine/kv_manager.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "plugin/host_services.h"
#include "plugin/plugin_registry.h"

namespace loom {

KvManager::KvManager(std::shared_ptr<LoadedPlugin> plugin, uint32_t n_blocks, uint32_t block_size, bool prefix_caching,
                     uint32_t n_state_slots, uint32_t n_state_checkpoints)
    : plugin_(std::move(plugin)), n_blocks_(n_blocks), block_size_(block_size), n_state_slots_(n_state_slots), prefix_caching_(prefix_caching) {
  table_ = plugin_->kv();
  if (table_ == nullptr) throw Error("plugin '" + plugin_->name() + "' is not a KV allocator");
  nlohmann::json config = {{"n_blocks", n_blocks}, {"block_size", block_size}, {"prefix_caching", prefix_caching}};
  if (n_state_slots > 0) {
    if (!LOOM_HAS_MEMBER(table_, loom_kv_i, take_pending_state_copies) || table_->seq_state_slot == nullptr) {
      throw Error("KV allocator '" + plugin_->name() +
                  "' has no per-sequence state slots (ABI 1.6), which a model with recurrent layers needs");
    }
    config["n_state_slots"] = n_state_slots;
    if (n_state_checkpoints > 0 && LOOM_HAS_MEMBER(table_, loom_kv_i, seq_checkpoint_state) &&
        table_->seq_checkpoint_state != nullptr) {
      config["n_state_checkpoints"] = n_state_checkpoints;
      n_state_checkpoints_ = n_state_checkpoints;
    }
  }
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  loom_status status = table_->create(default_host_services(), config.dump().c_str(), &kv_, error, sizeof(error));
  if (status != LOOM_STATUS_OK) throw Error("KV allocator '" + plugin_->name() + "' refused to start: " + error);
}

KvManager::~KvManager() {
  if (kv_ != nullptr) table_->destroy(kv_);
}

bool KvManager::set_event_listener(KvEventListener listener) {
  if (!LOOM_HAS_MEMBER(table_, loom_kv_i, set_event_sink) || table_->set_event_sink == nullptr) return false;
  listener_ = std::move(listener);
  const loom_status status = table_->set_event_sink(kv_, listener_ ? &KvManager::on_events : nullptr, this);
  if (status != LOOM_STATUS_OK) fail(status, "set_event_sink");
  return true;
}

void KvManager::on_events(void* user, const loom_kv_event* events, uint32_t n_events) {
  auto* self = static_cast<KvManager*>(user);
  if (!self->listener_ || events == nullptr) return;
  for (uint32_t i = 0; i < n_events; ++i) {
    const loom_kv_event& e = events[i];
    KvEvent event;
    event.type = e.type;
    event.block_hash = e.block_hash;
    if (e.type == LOOM_KV_EVENT_BLOCK_STORED) {
      if (e.has_parent != 0) event.parent_hash = e.parent_hash;
      if (e.tokens != nullptr) event.tokens.assign(e.tokens, e.tokens + e.n_tokens);
      if (LOOM_HAS_MEMBER(&e, loom_kv_event, cache_key)) event.cache_key = e.cache_key;
    }
    self->listener_(event);
  }
}

void KvManager::fail(loom_status status, const char* what) const {
  const char* message = table_->last_error(kv_);
  throw Error(std::string("KV allocator: ") + what + " failed (status " + std::to_string(status) +
              "): " + (message ? message : ""));
}

loom_kv_stats KvManager::stats() const {
  loom_kv_stats stats{};
  stats.struct_size = sizeof(stats);
  if (loom_status status = table_->get_stats(kv_, &stats); status != LOOM_STATUS_OK) fail(status, "get_stats");
  return stats;
}

bool KvManager::keyed_prefix_cache() const {
  return LOOM_HAS_MEMBER(table_, loom_kv_i, seq_create_keyed) && table_->seq_create_keyed != nullptr && table_->blocks_needed_keyed != nullptr;
}

uint32_t KvManager::blocks_needed(const std::vector<int32_t>& tokens, uint64_t cache_key) const {
  if (table_->blocks_needed == nullptr) {  // optional slot: assume no prefix reuse
    return static_cast<uint32_t>((tokens.size() + block_size_ - 1) / block_size_);
  }
  uint32_t n = 0;
  loom_status status = cache_key != 0 && keyed_prefix_cache()
                           ? table_->blocks_needed_keyed(kv_, tokens.data(), static_cast<uint32_t>(tokens.size()), cache_key, &n)
                           : table_->blocks_needed(kv_, tokens.data(), static_cast<uint32_t>(tokens.size()), &n);
  if (status != LOOM_STATUS_OK) fail(status, "blocks_needed");
  return n;
}

std::optional<uint32_t> KvManager::create(uint64_t seq_id, const std::vector<int32_t>& tokens, uint64_t cache_key) {
  uint32_t n_cached = 0;
  if (cache_key != 0 && prefix_caching_ && !keyed_prefix_cache())
    throw Error("KV allocator '" + plugin_->name() + "' cannot key its prefix cache by adapter (ABI 1.16): turn kv.prefix_caching off to serve LoRA adapters with it");
  loom_status status = cache_key != 0 && keyed_prefix_cache()
                           ? table_->seq_create_keyed(kv_, seq_id, tokens.data(), static_cast<uint32_t>(tokens.size()), cache_key, &n_cached)
                           : table_->seq_create(kv_, seq_id, tokens.data(), static_cast<uint32_t>(tokens.size()), &n_cached);
  if (status == LOOM_STATUS_OUT_OF_MEMORY) return std::nullopt;
  if (status != LOOM_STATUS_OK) fail(status, "seq_create");
  return n_cached;
}

bool KvManager::append(uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens) {
  loom_status status = table_->seq_append(kv_, seq_id, tokens, n_tokens);
  if (status == LOOM_STATUS_OUT_OF_MEMORY) return false;
  if (status != LOOM_STATUS_OK) fail(status, "seq_append");
  return true;
}

void KvManager::truncate(uint64_t seq_id, uint32_t n_keep) {
  if (table_->seq_truncate == nullptr) throw Error("KV allocator '" + plugin_->name() + "' cannot truncate sequences");
  if (loom_status status = table_->seq_truncate(kv_, seq_id, n_keep); status != LOOM_STATUS_OK) fail(status, "seq_truncate");
}

void KvManager::free(uint64_t seq_id) {
  if (loom_status status = table_->seq_free(kv_, seq_id); status != LOOM_STATUS_OK) fail(status, "seq_free");
}

std::vector<int32_t> KvManager::block_table(uint64_t seq_id) const {
  std::vector<int32_t> table(64);
  for (;;) {
    uint32_t n = 0;
    loom_status status = table_->seq_block_table(kv_, seq_id, table.data(), static_cast<uint32_t>(table.size()), &n);
    if (status == LOOM_STATUS_OK && n <= table.size()) {
      table.resize(n);
      return table;
    }
    if (status != LOOM_STATUS_OK && status != LOOM_STATUS_OUT_OF_RANGE) fail(status, "seq_block_table");
    table.resize(std::max<size_t>(n, table.size() * 2));
  }
}

// Both pending-copy queues: ask with room for 16, grow to what the allocator reports until it fits.
template <typename Copy>
std::vector<Copy> KvManager::take_all(loom_status (*take)(loom_kv_t*, Copy*, uint32_t, uint32_t*), const char* what) {
  std::vector<Copy> copies(16);
  for (;;) {
    uint32_t n = 0;
    for (auto& c : copies) c.struct_size = sizeof(c);
    loom_status status = take(kv_, copies.data(), static_cast<uint32_t>(copies.size()), &n);
    if (status == LOOM_STATUS_OK && n <= copies.size()) {
      copies.resize(n);
      return copies;
    }
    if (status != LOOM_STATUS_OK && status != LOOM_STATUS_OUT_OF_RANGE) fail(status, what);
    copies.resize(std::max<size_t>(n, copies.size() * 2));
  }
}

std::vector<loom_kv_block_copy> KvManager::take_pending_copies() {
  if (table_->take_pending_copies == nullptr) return {};
  return take_all(table_->take_pending_copies, "take_pending_copies");
}

int32_t KvManager::state_slot(uint64_t seq_id) const {
  int32_t slot = -1;
  if (loom_status status = table_->seq_state_slot(kv_, seq_id, &slot); status != LOOM_STATUS_OK) fail(status, "seq_state_slot");
  return slot;
}

void KvManager::checkpoint_state(uint64_t seq_id, uint32_t n_tokens) {
  if (n_state_checkpoints_ == 0) return;
  if (loom_status status = table_->seq_checkpoint_state(kv_, seq_id, n_tokens); status != LOOM_STATUS_OK) {
    fail(status, "seq_checkpoint_state");
  }
}

std::vector<loom_kv_state_copy> KvManager::take_pending_state_copies() {
  if (n_state_slots_ == 0 || table_->take_pending_state_copies == nullptr) return {};
  return take_all(table_->take_pending_state_copies, "take_pending_state_copies");
}

}  // namespace loom
