// Helpers shared by the kv conformance cases: one allocator instance with checked calls, the
// config string, and stats comparison.
#pragma once

#include <string>
#include <vector>

#include "conformance_case.h"
#include "loom/kv.h"

namespace loom::conformance {

inline std::string status_text(loom_status status) { return std::to_string(status); }

// One allocator instance, destroyed with the plugin's own destroy slot.
class KvInstance {
 public:
  KvInstance(const CaseContext& ctx, const std::string& config) : table_(ctx.plugin->kv()) {
    require(table_ != nullptr, "plugin has no kv table");
    char error[LOOM_ERROR_BUFFER_SIZE] = {};
    const loom_status status = table_->create(ctx.host, config.c_str(), &kv_, error, sizeof(error));
    require(status == LOOM_STATUS_OK && kv_ != nullptr,
            "create(" + config + ") failed with status " + status_text(status) + ": " + error);
  }
  ~KvInstance() {
    if (kv_ != nullptr) table_->destroy(kv_);
  }
  KvInstance(const KvInstance&) = delete;
  KvInstance& operator=(const KvInstance&) = delete;

  const loom_kv_i* operator->() const { return table_; }
  loom_kv_t* get() const { return kv_; }

  void ok(loom_status status, const std::string& what) const {
    require(status == LOOM_STATUS_OK,
            what + " failed with status " + status_text(status) + ": " + table_->last_error(kv_));
  }
  loom_kv_stats stats() const {
    loom_kv_stats s{};
    s.struct_size = sizeof(s);
    ok(table_->get_stats(kv_, &s), "get_stats");
    return s;
  }
  std::vector<int32_t> block_table(uint64_t seq_id) const {
    uint32_t n = 0;
    const loom_status probe = table_->seq_block_table(kv_, seq_id, nullptr, 0, &n);
    require(probe == LOOM_STATUS_OK || probe == LOOM_STATUS_OUT_OF_RANGE,
            "seq_block_table size query returned " + status_text(probe));
    std::vector<int32_t> blocks(n);
    uint32_t n2 = 0;
    ok(table_->seq_block_table(kv_, seq_id, blocks.data(), n, &n2), "seq_block_table");
    require(n2 == n, "seq_block_table reported two different lengths");
    return blocks;
  }
  uint32_t length(uint64_t seq_id) const {
    uint32_t n = 0;
    ok(table_->seq_length(kv_, seq_id, &n), "seq_length");
    return n;
  }
  std::vector<loom_kv_block_copy> take_copies() const {
    uint32_t n = 0;
    const loom_status probe = table_->take_pending_copies(kv_, nullptr, 0, &n);
    if (n == 0) {
      require(probe == LOOM_STATUS_OK, "take_pending_copies with nothing pending returned " + status_text(probe));
      return {};
    }
    std::vector<loom_kv_block_copy> copies(n);
    uint32_t n2 = 0;
    ok(table_->take_pending_copies(kv_, copies.data(), n, &n2), "take_pending_copies");
    require(n2 == n, "take_pending_copies reported two different counts");
    uint32_t n3 = 99;
    ok(table_->take_pending_copies(kv_, nullptr, 0, &n3), "take_pending_copies (after taking)");
    require(n3 == 0, "pending copies were not forgotten after being taken");
    return copies;
  }

 private:
  const loom_kv_i* table_ = nullptr;
  loom_kv_t* kv_ = nullptr;
};

inline std::string kv_config(uint32_t n_blocks, uint32_t block_size, bool prefix_caching) {
  return "{\"n_blocks\": " + std::to_string(n_blocks) + ", \"block_size\": " + std::to_string(block_size) +
         ", \"prefix_caching\": " + (prefix_caching ? "true" : "false") + "}";
}

inline bool same_stats(const loom_kv_stats& a, const loom_kv_stats& b) {
  return a.n_blocks == b.n_blocks && a.block_size == b.block_size && a.n_free == b.n_free && a.n_used == b.n_used &&
         a.n_cached == b.n_cached && a.n_seqs == b.n_seqs && a.prefix_queries == b.prefix_queries &&
         a.prefix_hits == b.prefix_hits && a.tokens_reused == b.tokens_reused;
}

inline std::vector<int32_t> iota_tokens(uint32_t n, int32_t first) {
  std::vector<int32_t> tokens(n);
  for (uint32_t i = 0; i < n; ++i) tokens[i] = first + static_cast<int32_t>(i);
  return tokens;
}

// ---- State slots (ABI 1.6) and checkpoints (ABI 1.7) ----

inline int32_t slot_of(const KvInstance& kv, uint64_t seq_id) {
  int32_t slot = -1;
  kv.ok(kv->seq_state_slot(kv.get(), seq_id, &slot), "seq_state_slot");
  return slot;
}

inline std::vector<loom_kv_state_copy> take_state_copies(const KvInstance& kv) {
  uint32_t n = 0;
  const loom_status probe = kv->take_pending_state_copies(kv.get(), nullptr, 0, &n);
  if (n == 0) {
    require(probe == LOOM_STATUS_OK, "take_pending_state_copies with nothing pending returned " + status_text(probe));
    return {};
  }
  std::vector<loom_kv_state_copy> copies(n);
  uint32_t n2 = 0;
  kv.ok(kv->take_pending_state_copies(kv.get(), copies.data(), n, &n2), "take_pending_state_copies");
  require(n2 == n, "take_pending_state_copies reported two different counts");
  return copies;
}

// A simulated recurrent state: a fold of every token a sequence has seen.
inline uint64_t fold(uint64_t state, int32_t token) { return (state ^ static_cast<uint32_t>(token)) * 0x100000001b3ull + 1; }

}  // namespace loom::conformance
