/*
 * loom/sampler.h — the sampler kind (LOOM_PLUGIN_KIND_SAMPLER).
 *
 * A sampler turns a batch of logit rows into tokens through a chain of stages whose order comes
 * from the request (or the plugin's default). It can also return the final distribution it samples
 * from, which speculative decoding needs. Logits are host memory in ABI 1.0; a backend-side
 * implementation can be offered later through the extension chain.
 *
 * Threading: an instance is thread-safe for sample() on disjoint rows with distinct states; a
 * sequence state is externally synchronised.
 */
#ifndef LOOM_SAMPLER_H
#define LOOM_SAMPLER_H

#include "loom/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_sampler loom_sampler_t;
typedef struct loom_sampler_state loom_sampler_state_t; /* per-sequence: RNG and counters */

typedef int32_t loom_sampler_stage;
#define LOOM_SAMPLER_STAGE_PENALTIES 1   /* repetition / frequency / presence over a window */
#define LOOM_SAMPLER_STAGE_LOGIT_BIAS 2
#define LOOM_SAMPLER_STAGE_TOP_K 3
#define LOOM_SAMPLER_STAGE_TOP_P 4
#define LOOM_SAMPLER_STAGE_MIN_P 5
#define LOOM_SAMPLER_STAGE_TYPICAL_P 6
#define LOOM_SAMPLER_STAGE_TEMPERATURE 7
/* (ABI 1.17) A plugin of 1.16 or earlier rejects these ids; the host puts them in a chain only when
 * the plugin's own default chain holds them. */
#define LOOM_SAMPLER_STAGE_TOP_N_SIGMA 8 /* keeps logits >= max - top_n_sigma * their standard deviation */
#define LOOM_SAMPLER_STAGE_XTC 9         /* exclude top choices: with probability xtc_probability, drops
                                          * every token of probability >= xtc_threshold but the least likely */
#define LOOM_SAMPLER_STAGE_DRY 10        /* "don't repeat yourself": penalises the token that would extend a
                                          * repeat of the history, multiplier * base^(length - allowed_length) */

#define LOOM_SAMPLER_MAX_STAGES 16

/* Neutral values disable a stage: top_k <= 0, top_p >= 1, min_p <= 0, typical_p >= 1,
 * penalties 1 / 0 / 0, top_n_sigma <= 0, xtc_probability 0, dry_multiplier 0.
 * temperature <= 0 means greedy (argmax). */
typedef struct loom_sampling_params {
  uint32_t struct_size;
  uint32_t n_stages; /* 0 = the plugin's default order */
  loom_sampler_stage stages[LOOM_SAMPLER_MAX_STAGES];
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  float typical_p;
  float repetition_penalty;
  float frequency_penalty;
  float presence_penalty;
  int32_t penalty_last_n; /* window of history the penalties see; -1 = all */
  uint32_t n_logit_bias;
  const int32_t *logit_bias_tokens; /* [n_logit_bias], borrowed */
  const float *logit_bias_values;
  uint32_t n_top_logprobs; /* alternatives to report per token (0 = none) */
  uint32_t reserved;
  /* (ABI 1.3) Structured output: bit t of word t / 32 set = token t may be chosen; NULL = every token.
   * [ceil(n_vocab / 32)] words, borrowed for the call. A plugin treats the others as -inf logits
   * (for the draw, out_probs and top logprobs alike). The host sets it only for plugins of 1.3 or
   * later (struct_size tells); for older ones it writes -inf into the logits itself. */
  const uint32_t *allowed_tokens;
  /* (ABI 1.17) The samplers llama.cpp users tune. A host of 1.16 or earlier passes a struct_size that
   * ends before them, and they read as off. Neutral values switch each off. */
  float top_n_sigma;                 /* <= 0: off */
  float xtc_probability;             /* 0: off */
  float xtc_threshold;               /* > 0.5: off (at most one token can reach it) */
  float dry_multiplier;              /* 0: off */
  float dry_base;                    /* > 1 */
  int32_t dry_allowed_length;        /* repeats up to this long go unpenalised */
  int32_t dry_penalty_last_n;        /* history DRY looks back over; -1 = all, 0 = off */
  uint32_t n_dry_breakers;
  const int32_t *dry_breaker_tokens; /* [n_dry_breakers] borrowed: tokens no repeat runs through (the host
                                      * maps breaker strings such as "\n" to the tokens that contain them) */
  /* Mirostat (Basu et al.): 1 or 2 replaces the chain's cuts (top-k/p, min-p, typical-p, top-n-sigma,
   * XTC, penalties, DRY) by Mirostat's own, targeting a surprise of mirostat_tau bits with learning
   * rate mirostat_eta; its running target lives in the sequence state. Bias and temperature still
   * apply, as in llama.cpp. 0: off. */
  int32_t mirostat;
  float mirostat_tau;
  float mirostat_eta;
} loom_sampling_params;

typedef struct loom_sample_row {
  uint32_t struct_size;
  uint32_t flags;                      /* LOOM_SAMPLE_* */
  const loom_sampling_params *params;  /* borrowed */
  loom_sampler_state_t *state;         /* from state_create; supplies the random stream */
  const int32_t *history;              /* tokens so far (prompt + output), borrowed, for penalties */
  uint32_t n_history;
  uint32_t reserved;
  const float *logits;                 /* [n_vocab], borrowed, not modified */
  /* outputs */
  int32_t token;
  float logprob;                       /* log of the chosen token's final probability */
  float *out_probs;                    /* [n_vocab] caller-owned or NULL: the final distribution */
  int32_t *top_tokens;                 /* [params->n_top_logprobs] caller-owned or NULL */
  float *top_logprobs;                 /* log-softmax of the raw logits, same order */
} loom_sample_row;

#define LOOM_SAMPLE_DISTRIBUTION_ONLY 1u /* fill out_probs, do not draw a token */

typedef struct loom_sampler_i {
  uint32_t struct_size;
  uint32_t reserved;
  /* config_json: defaults for every request, e.g. {"chain": ["penalties","top_k",...], "top_k": 40}.
   * Out-of-range values are rejected with a message naming the key and the range. */
  loom_status (*create)(const loom_host_services *host, const char *config_json, loom_sampler_t **out,
                        char *error, uint32_t error_size);
  void (*destroy)(loom_sampler_t *sampler);
  const char *(*last_error)(loom_sampler_t *sampler);
  /* Fill `out` with the configured defaults (caller sets out->struct_size). */
  loom_status (*default_params)(loom_sampler_t *sampler, loom_sampling_params *out);
  /* Check params; on error the message names the field and its allowed range. */
  loom_status (*validate_params)(loom_sampler_t *sampler, const loom_sampling_params *params);
  loom_status (*state_create)(loom_sampler_t *sampler, uint64_t seed, loom_sampler_state_t **out);
  void (*state_destroy)(loom_sampler_t *sampler, loom_sampler_state_t *state);
  /* Sample every row. No allocation per call beyond the instance's reusable scratch. */
  loom_status (*sample)(loom_sampler_t *sampler, loom_sample_row *rows, uint32_t n_rows, uint32_t n_vocab);
} loom_sampler_i;

#ifdef __cplusplus
}
#endif

#endif /* LOOM_SAMPLER_H */
