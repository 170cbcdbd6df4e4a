// SamplerHandle — the engine's C++ face of a sampler plugin instance (loom/sampler.h): the
// configured defaults, per-request parameter checks, per-sequence random states, batched sampling.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "loom/sampler.h"

namespace loom {

class LoadedPlugin;

class SamplerHandle {
 public:
  SamplerHandle(std::shared_ptr<LoadedPlugin> plugin, const SamplerSettings& settings);
  ~SamplerHandle();
  SamplerHandle(const SamplerHandle&) = delete;
  SamplerHandle& operator=(const SamplerHandle&) = delete;

  // The [sampler] section's values as parameters (the base every request starts from).
  const loom_sampling_params& defaults() const { return defaults_; }
  // loom::Error with the plugin's message (naming the field and its range) when params are invalid.
  void validate(const loom_sampling_params& params) const;
  loom_sampler_state_t* create_state(uint64_t seed);
  void destroy_state(loom_sampler_state_t* state);
  void sample(std::vector<loom_sample_row>& rows, uint32_t n_vocab);
  // Whether the plugin reads loom_sampling_params.allowed_tokens (ABI 1.3); for older plugins the
  // engine masks the logits itself.
  bool takes_token_masks() const;

  // Stage names of the config ("top_k", ...) to ids, loom::Error for an unknown one.
  static loom_sampler_stage stage_from_name(const std::string& name);

 private:
  [[noreturn]] void fail(loom_status status, const char* what) const;

  std::shared_ptr<LoadedPlugin> plugin_;
  const loom_sampler_i* table_ = nullptr;
  loom_sampler_t* sampler_ = nullptr;
  loom_sampling_params defaults_{};
};

}  // namespace loom
