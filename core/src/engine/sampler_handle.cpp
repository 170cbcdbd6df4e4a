#include "engine/sampler_handle.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "plugin/host_services.h"
#include "plugin/plugin_registry.h"

namespace loom {

loom_sampler_stage SamplerHandle::stage_from_name(const std::string& name) {
  static const std::pair<const char*, loom_sampler_stage> stages[] = {
      {"penalties", LOOM_SAMPLER_STAGE_PENALTIES}, {"logit_bias", LOOM_SAMPLER_STAGE_LOGIT_BIAS},
      {"top_k", LOOM_SAMPLER_STAGE_TOP_K},         {"top_p", LOOM_SAMPLER_STAGE_TOP_P},
      {"min_p", LOOM_SAMPLER_STAGE_MIN_P},         {"typical_p", LOOM_SAMPLER_STAGE_TYPICAL_P},
      {"temperature", LOOM_SAMPLER_STAGE_TEMPERATURE}, {"top_n_sigma", LOOM_SAMPLER_STAGE_TOP_N_SIGMA},
      {"xtc", LOOM_SAMPLER_STAGE_XTC},             {"dry", LOOM_SAMPLER_STAGE_DRY}};
  for (const auto& [stage_name, id] : stages) {
    if (name == stage_name) return id;
  }
  throw Error("unknown sampler stage '" + name + "'");
}

SamplerHandle::SamplerHandle(std::shared_ptr<LoadedPlugin> plugin, const SamplerSettings& s) : plugin_(std::move(plugin)) {
  table_ = plugin_->sampler();
  if (table_ == nullptr) throw Error("plugin '" + plugin_->name() + "' is not a sampler");
  nlohmann::json config = {{"temperature", s.temperature},
                           {"top_k", s.top_k},
                           {"top_p", s.top_p},
                           {"min_p", s.min_p},
                           {"typical_p", s.typical_p},
                           {"repetition_penalty", s.repetition_penalty},
                           {"frequency_penalty", s.frequency_penalty},
                           {"presence_penalty", s.presence_penalty},
                           {"penalty_last_n", s.penalty_last_n}};
  if (!s.chain.empty()) config["chain"] = s.chain;
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  loom_status status = table_->create(default_host_services(), config.dump().c_str(), &sampler_, error, sizeof(error));
  if (status != LOOM_STATUS_OK) throw Error("sampler '" + plugin_->name() + "' refused the [sampler] settings: " + error);

  defaults_.struct_size = sizeof(defaults_);
  if (table_->default_params != nullptr) {
    if (loom_status st = table_->default_params(sampler_, &defaults_); st != LOOM_STATUS_OK) fail(st, "default_params");
  } else {  // an older or simpler plugin: build the defaults from the settings ourselves
    defaults_.temperature = static_cast<float>(s.temperature);
    defaults_.top_k = static_cast<int32_t>(s.top_k);
    defaults_.top_p = static_cast<float>(s.top_p);
    defaults_.min_p = static_cast<float>(s.min_p);
    defaults_.typical_p = static_cast<float>(s.typical_p);
    defaults_.repetition_penalty = static_cast<float>(s.repetition_penalty);
    defaults_.frequency_penalty = static_cast<float>(s.frequency_penalty);
    defaults_.presence_penalty = static_cast<float>(s.presence_penalty);
    defaults_.penalty_last_n = static_cast<int32_t>(s.penalty_last_n);
  }
}

SamplerHandle::~SamplerHandle() {
  if (sampler_ != nullptr) table_->destroy(sampler_);
}

void SamplerHandle::fail(loom_status status, const char* what) const {
  const char* message = table_->last_error(sampler_);
  throw Error(std::string("sampler ") + what + " failed (status " + std::to_string(status) + "): " + (message ? message : ""));
}

void SamplerHandle::validate(const loom_sampling_params& params) const {
  if (table_->validate_params == nullptr) return;
  if (table_->validate_params(sampler_, &params) != LOOM_STATUS_OK) {
    const char* message = table_->last_error(sampler_);
    throw Error(message ? message : "invalid sampling parameters");
  }
}

loom_sampler_state_t* SamplerHandle::create_state(uint64_t seed) {
  loom_sampler_state_t* state = nullptr;
  if (loom_status status = table_->state_create(sampler_, seed, &state); status != LOOM_STATUS_OK) fail(status, "state_create");
  return state;
}

void SamplerHandle::destroy_state(loom_sampler_state_t* state) {
  if (state != nullptr) table_->state_destroy(sampler_, state);
}

void SamplerHandle::sample(std::vector<loom_sample_row>& rows, uint32_t n_vocab) {
  if (rows.empty()) return;
  loom_status status = table_->sample(sampler_, rows.data(), static_cast<uint32_t>(rows.size()), n_vocab);
  if (status != LOOM_STATUS_OK) fail(status, "sample");
}

bool SamplerHandle::takes_token_masks() const {
  const loom_plugin_desc& desc = plugin_->desc();
  return desc.abi_major == LOOM_ABI_MAJOR && desc.abi_minor >= 3;
}

}  // namespace loom
