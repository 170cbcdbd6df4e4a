// The samplers llama.cpp users tune, as request fields: OpenAI's logit_bias (a token-id map; llama.cpp's
// [[id, bias]] pairs too), top_n_sigma, XTC (xtc_probability, xtc_threshold), DRY (dry_multiplier,
// dry_base, dry_allowed_length, dry_penalty_last_n, dry_sequence_breakers) and Mirostat (mirostat,
// mirostat_tau, mirostat_eta), under llama.cpp's names. Each maps onto a stage of the sampler plugin's
// chain (ABI 1.17); a request that asks for a stage the configured chain lacks is refused, naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace loom::server {

struct TunedSampling {
  std::vector<std::pair<int64_t, float>> logit_bias;  // token id, bias (-inf bans)
  std::optional<double> top_n_sigma, xtc_probability, xtc_threshold, dry_multiplier, dry_base, mirostat_tau, mirostat_eta;
  std::optional<int64_t> dry_allowed_length, dry_penalty_last_n, mirostat;
  std::optional<std::vector<std::string>> dry_sequence_breakers;
};

// ApiError 400 naming the field that is malformed or out of range.
TunedSampling parse_tuned_sampling(const nlohmann::json& body);

// Into the request's sampling options (the plugin's defaults already there): ApiError 400 for a token
// id outside the vocabulary or a stage the chain lacks. DRY's breaker strings become the tokens whose
// text holds one (llama.cpp's defaults "\n", ":", "\"", "*" when none are given).
void apply_tuned_sampling(const TunedSampling& tuned, const Tokenizer& tokenizer, SamplingOptions& out);

}  // namespace loom::server
