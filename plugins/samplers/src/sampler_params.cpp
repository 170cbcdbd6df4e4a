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
    {LOOM_SAMPLER_STAGE_TEMPERATURE, "temperature"},
};

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

SamplerConfig builtin_config() {
  SamplerConfig config;
  loom_sampling_params& p = config.defaults;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(loom_sampling_params);
  // Penalties before any cut so they can demote a repeated favourite; temperature last so the cuts
  // (top-k/top-p/min-p) see the model's own distribution and a temperature change only reshapes
  // what survived, as in llama.cpp.
  const loom_sampler_stage chain[] = {LOOM_SAMPLER_STAGE_PENALTIES, LOOM_SAMPLER_STAGE_TOP_K,
                                      LOOM_SAMPLER_STAGE_TOP_P, LOOM_SAMPLER_STAGE_MIN_P,
                                      LOOM_SAMPLER_STAGE_TEMPERATURE};
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
                   " is not a known stage id; expected 1..7 (penalties, logit_bias, top_k, top_p, min_p, "
                   "typical_p, temperature)");
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
          fail_invalid("config: \"chain\" entry " + item.dump() +
                       " is not a stage; expected one of \"penalties\", \"logit_bias\", \"top_k\", \"top_p\", "
                       "\"min_p\", \"typical_p\", \"temperature\"");
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
    } else if (key == "seed") {
      if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
        fail_invalid("config: \"seed\" must be a non-negative integer");
      config.seed_salt = value.get<uint64_t>();
    } else {
      fail_invalid("config: unknown key \"" + key +
                   "\"; expected chain, temperature, top_k, top_p, min_p, typical_p, repetition_penalty, "
                   "frequency_penalty, presence_penalty, penalty_last_n, seed");
    }
  }
  validate_params(p, "config");
  return config;
}

}  // namespace loom::samplers
