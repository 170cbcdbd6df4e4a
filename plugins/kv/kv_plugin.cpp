// ABI glue: the loom_kv_i table, config parsing and the entry point. Every slot catches everything;
// no exception crosses the C ABI.
#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "loom/loom.h"
#include "paged_allocator.h"

struct loom_kv {
  loom::kv::PagedAllocator allocator;
  std::string last_error;
};

namespace loom::kv {
namespace {

constexpr uint32_t kMaxBlocks = 1u << 24;
constexpr uint32_t kMaxBlockSize = 4096;

void write_error(char* error, uint32_t error_size, const std::string& message) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min<size_t>(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

uint32_t read_count(const nlohmann::json& config, const char* key, uint32_t fallback, uint32_t lo, uint32_t hi) {
  if (!config.contains(key)) return fallback;
  const nlohmann::json& v = config.at(key);
  const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v.is_number_integer()) throw std::invalid_argument(std::string("kv config: \"") + key + "\" must be " + range);
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) {
    throw std::invalid_argument(std::string("kv config: \"") + key + "\" is " + std::to_string(n) + ", must be " + range);
  }
  return static_cast<uint32_t>(n);
}

AllocatorConfig parse_config(const char* config_json) {
  AllocatorConfig config;
  if (config_json == nullptr || config_json[0] == '\0') return config;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("kv config: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("kv config: expected a JSON object like {\"n_blocks\": 1024}");
  for (const auto& [key, value] : j.items()) {
    if (key != "n_blocks" && key != "block_size" && key != "prefix_caching" && key != "n_state_slots" &&
        key != "n_state_checkpoints") {
      throw std::invalid_argument("kv config: unknown key \"" + key +
                                  "\" (known: n_blocks, block_size, prefix_caching, n_state_slots, n_state_checkpoints)");
    }
  }
  config.n_blocks = read_count(j, "n_blocks", config.n_blocks, 1, kMaxBlocks);
  config.block_size = read_count(j, "block_size", config.block_size, 1, kMaxBlockSize);
  if (j.contains("n_state_slots")) config.n_state_slots = read_count(j, "n_state_slots", 0, 0, kMaxBlocks);
  if (j.contains("n_state_checkpoints")) {
    config.n_state_checkpoints = read_count(j, "n_state_checkpoints", 0, 0, kMaxBlocks);
    if (config.n_state_checkpoints > 0 && config.n_state_slots == 0) {
      throw std::invalid_argument("kv config: \"n_state_checkpoints\" keeps sequences' recurrent states and needs \"n_state_slots\" > 0");
    }
  }
  if (j.contains("prefix_caching")) {
    if (!j.at("prefix_caching").is_boolean()) {
      throw std::invalid_argument("kv config: \"prefix_caching\" must be true or false");
    }
    config.is_prefix_caching = j.at("prefix_caching").get<bool>();
  }
  return config;
}

loom_status finish(loom_kv_t* kv, const Outcome& outcome) {
  kv->last_error = outcome.message;
  return outcome.status;
}

// Runs `body` (returning an Outcome) and turns any exception into a status; never throws.
template <typename Body>
loom_status guarded(loom_kv_t* kv, Body&& body) {
  if (kv == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  try {
    return finish(kv, body());
  } catch (const std::bad_alloc&) {
    return finish(kv, {LOOM_STATUS_OUT_OF_MEMORY, "host allocation failed"});
  } catch (const std::exception& e) {
    return finish(kv, {LOOM_STATUS_INTERNAL, std::string("internal error: ") + e.what()});
  } catch (...) {
    return finish(kv, {LOOM_STATUS_INTERNAL, "internal error"});
  }
}

loom_status kv_create(const loom_host_services*, const char* config_json, loom_kv_t** out, char* error,
                      uint32_t error_size) {
  if (out == nullptr) {
    write_error(error, error_size, "kv create: out is NULL");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    *out = new loom_kv{PagedAllocator(parse_config(config_json)), {}};
    return LOOM_STATUS_OK;
  } catch (const std::invalid_argument& e) {
    write_error(error, error_size, e.what());
    return LOOM_STATUS_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    write_error(error, error_size, "kv create: allocation failed");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_error(error, error_size, std::string("kv create: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    write_error(error, error_size, "kv create: unknown error");
    return LOOM_STATUS_INTERNAL;
  }
}

void kv_destroy(loom_kv_t* kv) { delete kv; }

const char* kv_last_error(loom_kv_t* kv) { return kv == nullptr ? "kv handle is NULL" : kv->last_error.c_str(); }

loom_status kv_get_stats(loom_kv_t* kv, loom_kv_stats* out) {
  return guarded(kv, [&]() -> Outcome {
    if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
      return {LOOM_STATUS_INVALID_ARGUMENT, "get_stats: out is NULL or its struct_size is too small"};
    }
    // A reader built against an older header gets the members it knows about, nothing past them.
    const loom_kv_stats stats = kv->allocator.stats();
    const uint32_t n = std::min<uint32_t>(out->struct_size, sizeof(loom_kv_stats));
    std::memcpy(out, &stats, n);
    out->struct_size = n;
    return Outcome::ok();
  });
}

loom_status kv_blocks_needed_keyed(loom_kv_t* kv, const int32_t* tokens, uint32_t n_tokens, uint64_t cache_key,
                                   uint32_t* out_blocks) {
  return guarded(kv, [&]() -> Outcome {
    if (out_blocks == nullptr || (tokens == nullptr && n_tokens > 0)) {
      return {LOOM_STATUS_INVALID_ARGUMENT, "blocks_needed: tokens or out_blocks is NULL"};
    }
    *out_blocks = kv->allocator.blocks_needed(tokens, n_tokens, cache_key);
    return Outcome::ok();
  });
}

loom_status kv_blocks_needed(loom_kv_t* kv, const int32_t* tokens, uint32_t n_tokens, uint32_t* out_blocks) {
  return kv_blocks_needed_keyed(kv, tokens, n_tokens, 0, out_blocks);
}

loom_status kv_seq_create_keyed(loom_kv_t* kv, uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens, uint64_t cache_key,
                                uint32_t* out_n_cached) {
  return guarded(kv, [&] { return kv->allocator.seq_create(seq_id, tokens, n_tokens, out_n_cached, cache_key); });
}

loom_status kv_seq_create(loom_kv_t* kv, uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens,
                          uint32_t* out_n_cached) {
  return kv_seq_create_keyed(kv, seq_id, tokens, n_tokens, 0, out_n_cached);
}

loom_status kv_seq_append(loom_kv_t* kv, uint64_t seq_id, const int32_t* tokens, uint32_t n_tokens) {
  return guarded(kv, [&] { return kv->allocator.seq_append(seq_id, tokens, n_tokens); });
}

loom_status kv_seq_truncate(loom_kv_t* kv, uint64_t seq_id, uint32_t n_keep) {
  return guarded(kv, [&] { return kv->allocator.seq_truncate(seq_id, n_keep); });
}

loom_status kv_seq_fork(loom_kv_t* kv, uint64_t src_seq_id, uint64_t dst_seq_id) {
  return guarded(kv, [&] { return kv->allocator.seq_fork(src_seq_id, dst_seq_id); });
}

loom_status kv_seq_free(loom_kv_t* kv, uint64_t seq_id) {
  return guarded(kv, [&] { return kv->allocator.seq_free(seq_id); });
}

loom_status kv_seq_block_table(loom_kv_t* kv, uint64_t seq_id, int32_t* out, uint32_t cap, uint32_t* out_n) {
  return guarded(kv, [&] { return kv->allocator.seq_block_table(seq_id, out, cap, out_n); });
}

loom_status kv_seq_length(loom_kv_t* kv, uint64_t seq_id, uint32_t* out_n_tokens) {
  return guarded(kv, [&] { return kv->allocator.seq_length(seq_id, out_n_tokens); });
}

loom_status kv_take_pending_copies(loom_kv_t* kv, loom_kv_block_copy* out, uint32_t cap, uint32_t* out_n) {
  return guarded(kv, [&] { return kv->allocator.take_pending_copies(out, cap, out_n); });
}

loom_status kv_set_event_sink(loom_kv_t* kv, loom_kv_event_fn fn, void* user) {
  return guarded(kv, [&] {
    kv->allocator.set_event_sink(fn, user);
    return Outcome::ok();
  });
}

loom_status kv_seq_state_slot(loom_kv_t* kv, uint64_t seq_id, int32_t* out_slot) {
  return guarded(kv, [&] { return kv->allocator.seq_state_slot(seq_id, out_slot); });
}

loom_status kv_take_pending_state_copies(loom_kv_t* kv, loom_kv_state_copy* out, uint32_t cap, uint32_t* out_n) {
  return guarded(kv, [&] { return kv->allocator.take_pending_state_copies(out, cap, out_n); });
}

loom_status kv_seq_checkpoint_state(loom_kv_t* kv, uint64_t seq_id, uint32_t n_tokens) {
  return guarded(kv, [&] { return kv->allocator.seq_checkpoint_state(seq_id, n_tokens); });
}

const loom_kv_i kTable = {
    sizeof(loom_kv_i),      0,
    kv_create,              kv_destroy,
    kv_last_error,          kv_get_stats,
    kv_blocks_needed,       kv_seq_create,
    kv_seq_append,          kv_seq_truncate,
    kv_seq_fork,            kv_seq_free,
    kv_seq_block_table,     kv_seq_length,
    kv_take_pending_copies, kv_set_event_sink,
    kv_seq_state_slot,      kv_take_pending_state_copies,
    kv_seq_checkpoint_state, kv_blocks_needed_keyed,
    kv_seq_create_keyed,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc),
    LOOM_ABI_MAJOR,
    LOOM_ABI_MINOR,
    LOOM_PLUGIN_KIND_KV,
    "paged",
    "0.1.0",
    "Paged KV block allocator: ref-counted blocks, fork with copy-on-write, LRU prefix cache",
    &kTable,
};

}  // namespace
}  // namespace loom::kv

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::kv::kDesc;
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
