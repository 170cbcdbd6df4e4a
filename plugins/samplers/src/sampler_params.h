// Sampling parameters: stage names, the plugin's defaults, validation and config_json parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "loom/sampler.h"

namespace loom::samplers {

// Instance-wide settings from config_json.
struct SamplerConfig {
  loom_sampling_params defaults{};  // struct_size = sizeof(loom_sampling_params); chain in stages
  uint64_t seed_salt = 0;           // "seed": mixed into every state's seed
};

// The built-in configuration: chain penalties -> top_k -> top_p -> min_p -> temperature and
// llama.cpp's default values.
SamplerConfig builtin_config();

// Parses config_json over the built-in defaults. Throws SamplerError naming the key and the range.
SamplerConfig parse_config(const char* config_json);

// Throws SamplerError (INVALID_ARGUMENT) naming the first bad field and its allowed range.
// `what` prefixes the message ("config", "row 3: params").
void validate_params(const loom_sampling_params& params, const std::string& what);

// loom_sampling_params as ABI 1.0-1.2 laid it out ends before allowed_tokens; hosts of those
// versions pass that size, and the field reads as NULL for them.
inline constexpr uint32_t kParamsSize_1_0 = offsetof(loom_sampling_params, allowed_tokens);
inline const uint32_t* allowed_tokens(const loom_sampling_params& p) {
  return p.struct_size >= offsetof(loom_sampling_params, allowed_tokens) + sizeof(p.allowed_tokens) ? p.allowed_tokens : nullptr;
}

// The ABI 1.17 fields (top-n-sigma, XTC, DRY, Mirostat), read only when struct_size covers them: a
// host of 1.16 or earlier passes a shorter struct, and every one of them is off for it.
struct SamplerExtras {
  float top_n_sigma = 0.0f;
  float xtc_probability = 0.0f, xtc_threshold = 0.1f;
  float dry_multiplier = 0.0f, dry_base = 1.75f;
  int32_t dry_allowed_length = 2, dry_penalty_last_n = -1;
  uint32_t n_dry_breakers = 0;
  const int32_t* dry_breaker_tokens = nullptr;
  int32_t mirostat = 0;
  float mirostat_tau = 5.0f, mirostat_eta = 0.1f;
};
inline constexpr uint32_t kParamsSize_1_16 = offsetof(loom_sampling_params, top_n_sigma);
SamplerExtras extras_of(const loom_sampling_params& p);

const char* stage_name(loom_sampler_stage stage);  // nullptr for an unknown id
std::optional<loom_sampler_stage> stage_from_name(const std::string& name);

}  // namespace loom::samplers
