// The stages of the chain. Each narrows or reshapes a CandidateSet in place; each lives in its own
// stage_*.cpp. The exact formulas are the contract in docs/samplers.md.
#pragma once

#include <cstdint>

#include "candidates.h"
#include "loom/sampler.h"
#include "rng.h"
#include "sampler_params.h"

namespace loom::samplers {

// Repetition (CTRL / llama.cpp: positive logits divided, negative multiplied, once per distinct
// token), then frequency * count + presence subtracted, over the last penalty_last_n history tokens.
void apply_penalties(CandidateSet& set, const loom_sampling_params& params, const int32_t* history,
                     uint32_t n_history, uint32_t n_vocab, Scratch& scratch);
// Adds params->logit_bias_values to the listed tokens (duplicates add up; -inf bans a token).
void apply_logit_bias(CandidateSet& set, const loom_sampling_params& params, uint32_t n_vocab, Scratch& scratch);
// Keeps the k highest logits (k <= 0 or k >= n: unchanged).
void apply_top_k(CandidateSet& set, int32_t k, Scratch& scratch);
// Keeps the smallest set of most probable tokens whose probability sums to >= p.
void apply_top_p(CandidateSet& set, float p, Scratch& scratch);
// Keeps the tokens with probability >= min_p * (largest probability).
void apply_min_p(CandidateSet& set, float min_p);
// Locally typical sampling (Meister et al.): keeps the smallest set, ordered by |-log p - H|,
// whose probability sums to >= typical_p.
void apply_typical_p(CandidateSet& set, float typical_p, Scratch& scratch);
// Divides logits by the temperature; temperature <= 0 keeps only the argmax (greedy).
void apply_temperature(CandidateSet& set, float temperature);
// Keeps the logits >= max - n_sigma * (their standard deviation) (Tang et al., "Top-nσ"); n_sigma <= 0
// leaves the set as it is.
void apply_top_n_sigma(CandidateSet& set, float n_sigma);
// Exclude Top Choices: with the given probability (one uniform drawn from `rng` per call), drops every
// token whose probability is at least `threshold` except the least likely of them, when there are two
// or more. Without a stream it applies only at probability 1.
void apply_xtc(CandidateSet& set, float probability, float threshold, Rng* rng);
// DRY: the token that would extend a repeat of the history (its last dry_penalty_last_n tokens) by one
// gets multiplier * base^(length - allowed_length) subtracted when the repeat is at least
// allowed_length long; breaker tokens end a repeat.
void apply_dry(CandidateSet& set, const SamplerExtras& x, const int32_t* history, uint32_t n_history, uint32_t n_vocab,
               Scratch& scratch);
// Mirostat's truncation for the running target `mu` (bits): v2 keeps the tokens of surprise <= mu
// (at least one), v1 the top k of its Zipf estimate. The set ends sorted.
void mirostat_truncate(CandidateSet& set, const SamplerExtras& x, float mu, uint32_t n_vocab, Scratch& scratch);
// The target after a draw of log-probability `logprob` (natural log, in the truncated set).
float mirostat_update(float mu, const SamplerExtras& x, float logprob);

// Greedy straight from the raw logits: the first index of the largest, as apply_temperature(set, 0)
// picks on the scanned set. Returns -1 when some logit is NaN or +inf, or every logit is -inf, so the
// caller takes the full path, which names the offending logit.
int32_t argmax_logits(const float* logits, uint32_t n_vocab);

// Softmax over what is left; draws one token unless `rng` is null (then token = -1). Writes the final
// distribution to out_probs [n_vocab] when non-null (zeros for removed tokens).
struct Pick {
  int32_t token = -1;
  float logprob = 0.0f;
};
Pick pick_token(const CandidateSet& set, Rng* rng, float* out_probs, uint32_t n_vocab);

}  // namespace loom::samplers
