#include "server/tuned_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace loom::server {

namespace {

using nlohmann::json;

const json* present(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& body, const char* name, double lo, double hi) {
  const json* v = present(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw invalid_param(name, std::string("'") + name + "' must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw invalid_param(name, std::string("'") + name + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + v->dump());
  return x;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = present(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) throw invalid_param(name, std::string("'") + name + "' must be an integer");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw invalid_param(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
  return x;
}

int64_t token_id(const std::string& text) {
  size_t used = 0;
  int64_t id = -1;
  try {
    id = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || id < 0)
    throw invalid_param("logit_bias", "'logit_bias' keys must be token ids, got \"" + text + "\"");
  return id;
}

// OpenAI's {"id": bias} with bias in [-100, 100], or llama.cpp's [[id, bias], ...] where false bans.
std::vector<std::pair<int64_t, float>> parse_logit_bias(const json& v) {
  std::vector<std::pair<int64_t, float>> bias;
  const auto value_of = [](const json& b) -> float {
    if (b.is_boolean() && !b.get<bool>()) return -std::numeric_limits<float>::infinity();
    if (!b.is_number() || !(b.get<double>() >= -100.0 && b.get<double>() <= 100.0))
      throw invalid_param("logit_bias", "'logit_bias' values must be numbers in [-100, 100] (or false to ban a token), got " + b.dump());
    return b.get<float>();
  };
  if (v.is_object()) {
    for (const auto& [key, b] : v.items()) bias.emplace_back(token_id(key), value_of(b));
  } else if (v.is_array()) {
    for (const json& pair : v) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer())
        throw invalid_param("logit_bias", "'logit_bias' as an array holds [token id, bias] pairs, got " + pair.dump());
      bias.emplace_back(pair[0].get<int64_t>(), value_of(pair[1]));
    }
  } else {
    throw invalid_param("logit_bias", "'logit_bias' must be an object of token id -> bias");
  }
  return bias;
}

bool chain_has(const loom_sampling_params& p, loom_sampler_stage stage) {
  return std::find(p.stages, p.stages + p.n_stages, stage) != p.stages + p.n_stages;
}

void require_stage(const loom_sampling_params& p, loom_sampler_stage stage, const char* stage_name, const char* field) {
  if (!chain_has(p, stage))
    throw invalid_param(field, std::string("'") + field + "' needs the '" + stage_name +
                                   "' stage, which the server's sampler chain lacks ([sampler] chain, or a sampler plugin "
                                   "older than ABI 1.17)");
}

std::vector<int32_t> breaker_tokens(const Tokenizer& tok, const std::vector<std::string>& breakers) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string piece = tok.token_to_piece(id, false);
    for (const std::string& breaker : breakers) {
      if (!breaker.empty() && piece.find(breaker) != std::string::npos) {
        ids.push_back(id);
        break;
      }
    }
  }
  return ids;
}

}  // namespace

TunedSampling parse_tuned_sampling(const json& body) {
  TunedSampling t;
  if (const json* bias = present(body, "logit_bias")) t.logit_bias = parse_logit_bias(*bias);
  t.top_n_sigma = number(body, "top_n_sigma", -1.0, 1000.0);
  t.xtc_probability = number(body, "xtc_probability", 0.0, 1.0);
  t.xtc_threshold = number(body, "xtc_threshold", 0.0, 1.0);
  t.dry_multiplier = number(body, "dry_multiplier", 0.0, 1000.0);
  t.dry_base = number(body, "dry_base", 1.0, 1000.0);
  if (t.dry_base && *t.dry_base <= 1.0) throw invalid_param("dry_base", "'dry_base' must be greater than 1");
  t.dry_allowed_length = integer(body, "dry_allowed_length", 0, 1 << 20);
  t.dry_penalty_last_n = integer(body, "dry_penalty_last_n", -1, std::numeric_limits<int32_t>::max());
  if (const json* breakers = present(body, "dry_sequence_breakers")) {
    if (!breakers->is_array()) throw invalid_param("dry_sequence_breakers", "'dry_sequence_breakers' must be an array of strings");
    t.dry_sequence_breakers.emplace();
    for (const json& b : *breakers) {
      if (!b.is_string()) throw invalid_param("dry_sequence_breakers", "'dry_sequence_breakers' must be an array of strings");
      t.dry_sequence_breakers->push_back(b.get<std::string>());
    }
  }
  t.mirostat = integer(body, "mirostat", 0, 2);
  t.mirostat_tau = number(body, "mirostat_tau", 0.0, 100.0);
  t.mirostat_eta = number(body, "mirostat_eta", 0.0, 10.0);
  return t;
}

void apply_tuned_sampling(const TunedSampling& t, const Tokenizer& tok, SamplingOptions& out) {
  loom_sampling_params& p = out.params;
  if (!t.logit_bias.empty()) {
    require_stage(p, LOOM_SAMPLER_STAGE_LOGIT_BIAS, "logit_bias", "logit_bias");
    for (const auto& [id, bias] : t.logit_bias) {
      if (id >= tok.n_vocab())
        throw invalid_param("logit_bias", "'logit_bias' names token " + std::to_string(id) + ", outside the vocabulary (0.." +
                                              std::to_string(tok.n_vocab() - 1) + ")");
      out.logit_bias_tokens.push_back(static_cast<int32_t>(id));
      out.logit_bias_values.push_back(bias);
    }
  }
  if (t.top_n_sigma && *t.top_n_sigma > 0) require_stage(p, LOOM_SAMPLER_STAGE_TOP_N_SIGMA, "top_n_sigma", "top_n_sigma");
  if (t.top_n_sigma) p.top_n_sigma = static_cast<float>(*t.top_n_sigma);
  if (t.xtc_probability && *t.xtc_probability > 0) require_stage(p, LOOM_SAMPLER_STAGE_XTC, "xtc", "xtc_probability");
  if (t.xtc_probability) p.xtc_probability = static_cast<float>(*t.xtc_probability);
  if (t.xtc_threshold) p.xtc_threshold = static_cast<float>(*t.xtc_threshold);
  if (t.dry_multiplier && *t.dry_multiplier > 0) require_stage(p, LOOM_SAMPLER_STAGE_DRY, "dry", "dry_multiplier");
  if (t.dry_multiplier) p.dry_multiplier = static_cast<float>(*t.dry_multiplier);
  if (t.dry_base) p.dry_base = static_cast<float>(*t.dry_base);
  if (t.dry_allowed_length) p.dry_allowed_length = static_cast<int32_t>(*t.dry_allowed_length);
  if (t.dry_penalty_last_n) p.dry_penalty_last_n = static_cast<int32_t>(*t.dry_penalty_last_n);
  if (p.dry_multiplier > 0)
    out.dry_breaker_tokens = breaker_tokens(tok, t.dry_sequence_breakers.value_or(std::vector<std::string>{"\n", ":", "\"", "*"}));
  if (t.mirostat) p.mirostat = static_cast<int32_t>(*t.mirostat);
  if (t.mirostat_tau) p.mirostat_tau = static_cast<float>(*t.mirostat_tau);
  if (t.mirostat_eta) p.mirostat_eta = static_cast<float>(*t.mirostat_eta);
}

}  // namespace loom::server
