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

#define LOOM_SAMPLER_MAX_STAGES 16

/* Neutral values disable a stage: top_k <= 0, top_p >= 1, min_p <= 0, typical_p >= 1,
 * penalties 1 / 0 / 0. temperature <= 0 means greedy (argmax). */
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
