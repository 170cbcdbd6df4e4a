#include "engine/drafter_plugin.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "config/config.h"
#include "plugin/plugin_registry.h"

namespace loom {

std::string drafter_config_json(const Config& config) {
  nlohmann::json json = {{"k", config.drafter.k}, {"ngram_max", config.drafter.ngram_max}};
  if (!config.drafter.model.empty()) json["model"] = config.drafter.model;
  return json.dump();
}

PluginDrafter::PluginDrafter(std::shared_ptr<LoadedPlugin> plugin, const loom_host_services* host,
                             const std::string& config_json)
    : plugin_(std::move(plugin)) {
  table_ = plugin_->drafter();
  if (table_ == nullptr) throw Error("plugin '" + plugin_->name() + "' is not a drafter");
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  loom_status status = table_->create(host, config_json.c_str(), &drafter_, error, sizeof(error));
  if (status != LOOM_STATUS_OK) throw Error("drafter '" + plugin_->name() + "' refused to start: " + error);
}

PluginDrafter::~PluginDrafter() {
  if (drafter_ != nullptr) table_->destroy(drafter_);
}

std::string PluginDrafter::name() const { return plugin_->name(); }

void PluginDrafter::fail(loom_status status, const char* what) const {
  const char* message = table_->last_error(drafter_);
  throw Error("drafter '" + plugin_->name() + "': " + what + " failed (status " + std::to_string(status) +
              "): " + (message ? message : ""));
}

void PluginDrafter::propose(std::vector<DraftJob>& jobs, uint32_t n_vocab) {
  requests_.assign(jobs.size(), loom_draft_request{});
  for (size_t i = 0; i < jobs.size(); ++i) {
    DraftJob& job = jobs[i];
    job.draft.assign(job.max_draft, -1);
    job.probs.assign(size_t(job.max_draft) * n_vocab, 0.0f);
    loom_draft_request& r = requests_[i];
    r.struct_size = sizeof(r);
    r.max_draft = job.max_draft;
    r.seq_id = job.seq_id;
    r.tokens = job.tokens.data();
    r.n_tokens = static_cast<uint32_t>(job.tokens.size());
    r.n_vocab = n_vocab;
    r.out_tokens = job.draft.data();
    r.out_probs = job.probs.data();
  }
  if (loom_status s = table_->propose(drafter_, requests_.data(), static_cast<uint32_t>(requests_.size()));
      s != LOOM_STATUS_OK) {
    for (auto& job : jobs) job.draft.clear();
    fail(s, "propose");
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    DraftJob& job = jobs[i];
    const loom_draft_request& r = requests_[i];
    uint32_t n = std::min(r.n_drafted, job.max_draft);
    // Keep the proposals up to the first invalid one; anything after it cannot be verified anyway.
    for (uint32_t t = 0; t < n; ++t) {
      const int32_t token = job.draft[t];
      bool is_valid = token >= 0 && static_cast<uint32_t>(token) < n_vocab;
      if (is_valid && r.has_probs) {
        const float q = job.probs[size_t(t) * n_vocab + static_cast<size_t>(token)];
        is_valid = std::isfinite(q) && q > 0.0f;
      }
      if (!is_valid) {
        n = t;
        break;
      }
    }
    job.draft.resize(n);
    job.has_probs = r.has_probs != 0;
    if (job.has_probs) {
      job.probs.resize(size_t(n) * n_vocab);
    } else {
      job.probs.clear();
    }
  }
}

void PluginDrafter::accepted(uint64_t seq_id, uint32_t n_tokens) {
  if (table_->accepted == nullptr) return;
  if (loom_status s = table_->accepted(drafter_, seq_id, n_tokens); s != LOOM_STATUS_OK && s != LOOM_STATUS_NOT_FOUND) {
    fail(s, "accepted");
  }
}

void PluginDrafter::release(uint64_t seq_id) {
  if (table_->release != nullptr) table_->release(drafter_, seq_id);
}

}  // namespace loom
