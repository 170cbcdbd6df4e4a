#include "sampler_params.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "candidates.h"

namespace loom::samplers {

namespace {

struct StageName {
  loom_sampler_stage stage;
  const char* name;
};
constexpr StageName k_stage_names[] = {
    {LOOM_SAMPLER_STAGE_PENALTIES, "penalties"}, {LOOM_SAMPLER_STAGE_LOGIT_BIAS, "logit_bias"},
    {LOOM_SAMPLER_STAGE_TOP_K, "top_k"},         {LOOM_SAMPLER_STAGE_TOP_P, "top_p"},
    {LOOM_SAMPLER_STAGE_MIN_P, "min_p"},         {LOOM_SAMPLER_STAGE_TYPICAL_P, "typical_p"},
    {LOOM_SAMPLER_STAGE_TEMPERATURE, "temperature"}, {LOOM_SAMPLER_STAGE_TOP_N_SIGMA, "top_n_sigma"},
    {LOOM_SAMPLER_STAGE_XTC, "xtc"},             {LOOM_SAMPLER_STAGE_DRY, "dry"},
};

constexpr const char* kStageList = "\"penalties\", \"logit_bias\", \"dry\", \"top_n_sigma\", \"top_k\", \"top_p\", \"min_p\", "
                                   "\"typical_p\", \"xtc\", \"temperature\"";

std::string format_value(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

[[noreturn]] void out_of_range(const std::string& what, const char* key, double value, const char* range) {
  fail_invalid(what + ": " + key + " = " + format_value(value) + " is out of range; expected " + range);
}

using json = nlohmann::json;

float json_float(const json& value, const char* key) {
  if (!value.is_number()) fail_invalid(std::string("config: \"") + key + "\" must be a number");
  return value.get<float>();
}

int32_t json_int(const json& value, const char* key, int64_t lo, int64_t hi) {
  if (!value.is_number_integer())
    fail_invalid(std::string("config: \"") + key + "\" must be an integer");
  const int64_t v = value.get<int64_t>();
  if (v < lo || v > hi)
    fail_invalid(std::string("config: ") + key + " = " + std::to_string(v) + " is out of range; expected [" +
                 std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int32_t>(v);
}

}  // namespace

const char* stage_name(loom_sampler_stage stage) {
  for (const StageName& entry : k_stage_names)
    if (entry.stage == stage) return entry.name;
  return nullptr;
}

std::optional<loom_sampler_stage> stage_from_name(const std::string& name) {
  for (const StageName& entry : k_stage_names)
    if (name == entry.name) return entry.stage;
  return std::nullopt;
}

SamplerExtras extras_of(const loom_sampling_params& p) {
  SamplerExtras x;
  if (p.struct_size < offsetof(loom_sampling_params, mirostat_eta) + sizeof(p.mirostat_eta)) return x;
  x.top_n_sigma = p.top_n_sigma;
  x.xtc_probability = p.xtc_probability;
  x.xtc_threshold = p.xtc_threshold;
  x.dry_multiplier = p.dry_multiplier;
  x.dry_base = p.dry_base;
  x.dry_allowed_length = p.dry_allowed_length;
  x.dry_penalty_last_n = p.dry_penalty_last_n;
  x.n_dry_breakers = p.n_dry_breakers;
  x.dry_breaker_tokens = p.dry_breaker_tokens;
  x.mirostat = p.mirostat;
  x.mirostat_tau = p.mirostat_tau;
  x.mirostat_eta = p.mirostat_eta;
  return x;
}

SamplerConfig builtin_config() {
  SamplerConfig config;
  loom_sampling_params& p = config.defaults;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(loom_sampling_params);
  // llama.cpp's order: bias, penalties and DRY before any cut so they can demote a repeated
  // favourite; top-n-sigma, top-k, top-p, min-p, then XTC on what is left; temperature last so the
  // cuts see the model's own distribution and a temperature change only reshapes what survived.
  // Stages with neutral values (bias, DRY, top-n-sigma, XTC by default) cost nothing.
  const loom_sampler_stage chain[] = {LOOM_SAMPLER_STAGE_LOGIT_BIAS,  LOOM_SAMPLER_STAGE_PENALTIES, LOOM_SAMPLER_STAGE_DRY,
                                      LOOM_SAMPLER_STAGE_TOP_N_SIGMA, LOOM_SAMPLER_STAGE_TOP_K,     LOOM_SAMPLER_STAGE_TOP_P,
                                      LOOM_SAMPLER_STAGE_MIN_P,       LOOM_SAMPLER_STAGE_XTC,       LOOM_SAMPLER_STAGE_TEMPERATURE};
  p.n_stages = sizeof(chain) / sizeof(chain[0]);
  for (uint32_t i = 0; i < p.n_stages; ++i) p.stages[i] = chain[i];
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.typical_p = 1.0f;
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.0f;
  p.penalty_last_n = 64;
  const SamplerExtras off;
  p.top_n_sigma = off.top_n_sigma;
  p.xtc_probability = off.xtc_probability;
  p.xtc_threshold = off.xtc_threshold;
  p.dry_multiplier = off.dry_multiplier;
  p.dry_base = off.dry_base;
  p.dry_allowed_length = off.dry_allowed_length;
  p.dry_penalty_last_n = off.dry_penalty_last_n;
  p.mirostat = off.mirostat;
  p.mirostat_tau = off.mirostat_tau;
  p.mirostat_eta = off.mirostat_eta;
  return config;
}

void validate_params(const loom_sampling_params& p, const std::string& what) {
  if (p.struct_size < kParamsSize_1_0)
    fail_invalid(what + ": struct_size = " + std::to_string(p.struct_size) + " is smaller than ABI 1.0's " +
                 std::to_string(kParamsSize_1_0));
  if (p.n_stages > LOOM_SAMPLER_MAX_STAGES)
    fail_invalid(what + ": n_stages = " + std::to_string(p.n_stages) + " is out of range; expected [0, " +
                 std::to_string(LOOM_SAMPLER_MAX_STAGES) + "]");
  for (uint32_t i = 0; i < p.n_stages; ++i)
    if (stage_name(p.stages[i]) == nullptr)
      fail_invalid(what + ": stages[" + std::to_string(i) + "] = " + std::to_string(p.stages[i]) +
                   " is not a known stage id; expected 1..10 (penalties, logit_bias, top_k, top_p, min_p, "
                   "typical_p, temperature, top_n_sigma, xtc, dry)");
  // `!(x >= lo)` instead of `x < lo` so NaN is rejected too.
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    out_of_range(what, "temperature", p.temperature, ">= 0 and finite (0 = greedy)");
  if (p.top_k < 0) out_of_range(what, "top_k", p.top_k, ">= 0 (0 = disabled; k > vocabulary keeps all)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) out_of_range(what, "top_p", p.top_p, "(0, 1] (1 = disabled)");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) out_of_range(what, "min_p", p.min_p, "[0, 1] (0 = disabled)");
  if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f))
    out_of_range(what, "typical_p", p.typical_p, "(0, 1] (1 = disabled)");
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty))
    out_of_range(what, "repetition_penalty", p.repetition_penalty, "> 0 and finite (1 = disabled)");
  if (!std::isfinite(p.frequency_penalty))
    out_of_range(what, "frequency_penalty", p.frequency_penalty, "a finite number (0 = disabled)");
  if (!std::isfinite(p.presence_penalty))
    out_of_range(what, "presence_penalty", p.presence_penalty, "a finite number (0 = disabled)");
  if (p.penalty_last_n < -1)
    out_of_range(what, "penalty_last_n", p.penalty_last_n, ">= -1 (-1 = the whole history, 0 = disabled)");
  if (p.n_logit_bias > 0 && (p.logit_bias_tokens == nullptr || p.logit_bias_values == nullptr))
    fail_invalid(what + ": n_logit_bias = " + std::to_string(p.n_logit_bias) +
                 " but logit_bias_tokens or logit_bias_values is NULL");
  for (uint32_t i = 0; i < p.n_logit_bias; ++i) {
    const float v = p.logit_bias_values[i];
    if (std::isnan(v) || v == INFINITY)
      out_of_range(what, ("logit_bias_values[" + std::to_string(i) + "]").c_str(), v,
                   "a finite number or -inf (bans the token)");
    if (p.logit_bias_tokens[i] < 0)
      fail_invalid(what + ": logit_bias_tokens[" + std::to_string(i) + "] = " +
                   std::to_string(p.logit_bias_tokens[i]) + " is negative; expected a token id in [0, n_vocab)");
  }
  const SamplerExtras x = extras_of(p);
  if (!std::isfinite(x.top_n_sigma)) out_of_range(what, "top_n_sigma", x.top_n_sigma, "a finite number (<= 0 = disabled)");
  if (!(x.xtc_probability >= 0.0f && x.xtc_probability <= 1.0f))
    out_of_range(what, "xtc_probability", x.xtc_probability, "[0, 1] (0 = disabled)");
  if (!(x.xtc_threshold >= 0.0f && x.xtc_threshold <= 1.0f))
    out_of_range(what, "xtc_threshold", x.xtc_threshold, "[0, 1] (above 0.5 = disabled)");
  if (!(x.dry_multiplier >= 0.0f) || std::isinf(x.dry_multiplier))
    out_of_range(what, "dry_multiplier", x.dry_multiplier, ">= 0 and finite (0 = disabled)");
  if (x.dry_multiplier > 0.0f && (!(x.dry_base > 1.0f) || std::isinf(x.dry_base)))
    out_of_range(what, "dry_base", x.dry_base, "> 1 and finite");
  if (x.dry_allowed_length < 0) out_of_range(what, "dry_allowed_length", x.dry_allowed_length, ">= 0");
  if (x.dry_penalty_last_n < -1)
    out_of_range(what, "dry_penalty_last_n", x.dry_penalty_last_n, ">= -1 (-1 = the whole history, 0 = disabled)");
  if (x.n_dry_breakers > 0 && x.dry_breaker_tokens == nullptr)
    fail_invalid(what + ": n_dry_breakers = " + std::to_string(x.n_dry_breakers) + " but dry_breaker_tokens is NULL");
  if (x.mirostat < 0 || x.mirostat > 2) out_of_range(what, "mirostat", x.mirostat, "0 (off), 1 or 2");
  if (x.mirostat != 0 && (!(x.mirostat_tau >= 0.0f) || std::isinf(x.mirostat_tau)))
    out_of_range(what, "mirostat_tau", x.mirostat_tau, ">= 0 and finite (bits)");
  if (x.mirostat != 0 && (!(x.mirostat_eta >= 0.0f) || std::isinf(x.mirostat_eta)))
    out_of_range(what, "mirostat_eta", x.mirostat_eta, ">= 0 and finite");
}

SamplerConfig parse_config(const char* config_json) {
  SamplerConfig config = builtin_config();
  if (config_json == nullptr || config_json[0] == '\0') return config;
  json doc;
  try {
    doc = json::parse(config_json);
  } catch (const json::parse_error& e) {
    fail_invalid(std::string("config: not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail_invalid("config: expected a JSON object, e.g. {\"top_k\": 40}");
  loom_sampling_params& p = config.defaults;
  for (const auto& [key, value] : doc.items()) {
    if (key == "chain") {
      if (!value.is_array()) fail_invalid("config: \"chain\" must be an array of stage names");
      if (value.size() > LOOM_SAMPLER_MAX_STAGES)
        fail_invalid("config: \"chain\" has " + std::to_string(value.size()) + " stages; at most " +
                     std::to_string(LOOM_SAMPLER_MAX_STAGES) + " are allowed");
      p.n_stages = 0;
      for (const json& item : value) {
        const auto stage = item.is_string() ? stage_from_name(item.get<std::string>()) : std::nullopt;
        if (!stage)
          fail_invalid("config: \"chain\" entry " + item.dump() + " is not a stage; expected one of " + kStageList);
        p.stages[p.n_stages++] = *stage;
      }
    } else if (key == "temperature") {
      p.temperature = json_float(value, "temperature");
    } else if (key == "top_k") {
      p.top_k = json_int(value, "top_k", 0, INT32_MAX);
    } else if (key == "top_p") {
      p.top_p = json_float(value, "top_p");
    } else if (key == "min_p") {
      p.min_p = json_float(value, "min_p");
    } else if (key == "typical_p") {
      p.typical_p = json_float(value, "typical_p");
    } else if (key == "repetition_penalty") {
      p.repetition_penalty = json_float(value, "repetition_penalty");
    } else if (key == "frequency_penalty") {
      p.frequency_penalty = json_float(value, "frequency_penalty");
    } else if (key == "presence_penalty") {
      p.presence_penalty = json_float(value, "presence_penalty");
    } else if (key == "penalty_last_n") {
      p.penalty_last_n = json_int(value, "penalty_last_n", -1, INT32_MAX);
    } else if (key == "top_n_sigma") {
      p.top_n_sigma = json_float(value, "top_n_sigma");
    } else if (key == "xtc_probability") {
      p.xtc_probability = json_float(value, "xtc_probability");
    } else if (key == "xtc_threshold") {
      p.xtc_threshold = json_float(value, "xtc_threshold");
    } else if (key == "dry_multiplier") {
      p.dry_multiplier = json_float(value, "dry_multiplier");
    } else if (key == "dry_base") {
      p.dry_base = json_float(value, "dry_base");
    } else if (key == "dry_allowed_length") {
      p.dry_allowed_length = json_int(value, "dry_allowed_length", 0, INT32_MAX);
    } else if (key == "dry_penalty_last_n") {
      p.dry_penalty_last_n = json_int(value, "dry_penalty_last_n", -1, INT32_MAX);
    } else if (key == "mirostat") {
      p.mirostat = json_int(value, "mirostat", 0, 2);
    } else if (key == "mirostat_tau") {
      p.mirostat_tau = json_float(value, "mirostat_tau");
    } else if (key == "mirostat_eta") {
      p.mirostat_eta = json_float(value, "mirostat_eta");
    } else if (key == "seed") {
      if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
        fail_invalid("config: \"seed\" must be a non-negative integer");
      config.seed_salt = value.get<uint64_t>();
    } else {
      fail_invalid("config: unknown key \"" + key +
                   "\"; expected chain, temperature, top_k, top_p, min_p, typical_p, repetition_penalty, "
                   "frequency_penalty, presence_penalty, penalty_last_n, top_n_sigma, xtc_probability, xtc_threshold, "
                   "dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n, mirostat, mirostat_tau, "
                   "mirostat_eta, seed");
    }
  }
  validate_params(p, "config");
  return config;
}

}  // namespace loom::samplers
