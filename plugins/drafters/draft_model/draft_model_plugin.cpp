// ABI glue for the draft-model drafter: config parsing, the loom_drafter_i table, the entry point.
#include <memory>
#include <string>

#include "draft_model_drafter.h"
#include "drafter_support.h"

struct loom_drafter {
  std::unique_ptr<loom::drafters::DraftModelDrafter> impl;
  std::string last_error;
};

namespace loom::drafters {
namespace {

constexpr const char* kName = "draft_model";

DraftModelOptions read_options(const char* config_json) {
  const auto config = parse_config(config_json, kName, {"k", "model", "ngram_max", "temperature", "seed"});
  DraftModelOptions options;
  options.k = static_cast<uint32_t>(read_int(config, kName, "k", 4, 1, 64));
  if (config.contains("model")) {
    if (!config.at("model").is_string()) fail(LOOM_STATUS_INVALID_ARGUMENT, "draft_model config: \"model\" must be a path string");
    options.model_path = config.at("model").get<std::string>();
  }
  if (config.contains("temperature")) {
    const auto& t = config.at("temperature");
    if (!t.is_number() || t.get<double>() < 0.0 || t.get<double>() > 100.0) {
      fail(LOOM_STATUS_INVALID_ARGUMENT, "draft_model config: \"temperature\" must be a number in [0, 100] (0 = greedy)");
    }
    options.temperature = t.get<float>();
  }
  if (config.contains("seed")) {
    if (!config.at("seed").is_number_unsigned() && !config.at("seed").is_number_integer()) {
      fail(LOOM_STATUS_INVALID_ARGUMENT, "draft_model config: \"seed\" must be an integer");
    }
    options.seed = config.at("seed").get<uint64_t>();
  }
  return options;
}

loom_status model_create(const loom_host_services* host, const char* config_json, loom_drafter_t** out, char* error,
                         uint32_t error_size) {
  if (out == nullptr) {
    write_error(error, error_size, "draft_model create: out is NULL");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  std::string message;
  loom_status status = guarded(&message, [&] {
    auto drafter = std::make_unique<loom_drafter>();
    drafter->impl = std::make_unique<DraftModelDrafter>(host, read_options(config_json));
    *out = drafter.release();
  });
  if (status != LOOM_STATUS_OK) write_error(error, error_size, message);
  return status;
}

void model_destroy(loom_drafter_t* drafter) { delete drafter; }

const char* model_last_error(loom_drafter_t* drafter) { return drafter == nullptr ? "" : drafter->last_error.c_str(); }

loom_status model_propose(loom_drafter_t* drafter, loom_draft_request* requests, uint32_t n_requests) {
  if (drafter == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(&drafter->last_error, [&] {
    validate_requests(requests, n_requests);
    for (uint32_t i = 0; i < n_requests; ++i) drafter->impl->propose(requests[i]);
  });
}

loom_status model_accepted(loom_drafter_t* drafter, uint64_t seq_id, uint32_t n_tokens) {
  if (drafter == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(&drafter->last_error, [&] { drafter->impl->accepted(seq_id, n_tokens); });
}

void model_release(loom_drafter_t* drafter, uint64_t seq_id) {
  if (drafter == nullptr) return;
  guarded(&drafter->last_error, [&] { drafter->impl->release(seq_id); });
}

const loom_drafter_i kTable = {
    sizeof(loom_drafter_i), 0, model_create, model_destroy, model_last_error, model_propose, model_accepted,
    model_release,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc),
    LOOM_ABI_MAJOR,
    LOOM_ABI_MINOR,
    LOOM_PLUGIN_KIND_DRAFTER,
    kName,
    "0.1.0",
    "Draft-model drafter: a small model with the target's vocabulary proposes k tokens (run by the host)",
    &kTable,
};

}  // namespace
}  // namespace loom::drafters

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::drafters::kDesc;
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
