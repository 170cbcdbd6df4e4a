/*
 * loom/drafter.h — the speculative-decoding drafter kind (LOOM_PLUGIN_KIND_DRAFTER).
 *
 * A drafter proposes up to k next tokens for a sequence. The core verifies them with the target
 * model in one pass and keeps the target's distribution exactly (rejection sampling), so a drafter
 * can only change speed, never output. A drafter that needs a model runs it through the host's
 * model_* services.
 *
 * Threading: an instance is externally synchronised.
 */
#ifndef LOOM_DRAFTER_H
#define LOOM_DRAFTER_H

#include "loom/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_drafter loom_drafter_t;

typedef struct loom_draft_request {
  uint32_t struct_size;
  uint32_t max_draft;     /* k: at most this many proposals */
  uint64_t seq_id;
  const int32_t *tokens;  /* the whole sequence so far (prompt + output), borrowed */
  uint32_t n_tokens;
  uint32_t n_vocab;
  int32_t *out_tokens;    /* [max_draft], caller-owned */
  float *out_probs;       /* [max_draft, n_vocab] caller-owned or NULL */
  uint32_t n_drafted;     /* out */
  uint32_t has_probs;     /* out: 1 when out_probs holds the drafter's distributions, else the
                             proposals are deterministic (q is one-hot) */
} loom_draft_request;

typedef struct loom_drafter_i {
  uint32_t struct_size;
  uint32_t reserved;
  /* config_json: {"k": 4, "model": "path.gguf", "ngram_max": 3, ...} */
  loom_status (*create)(const loom_host_services *host, const char *config_json, loom_drafter_t **out,
                        char *error, uint32_t error_size);
  void (*destroy)(loom_drafter_t *drafter);
  const char *(*last_error)(loom_drafter_t *drafter);
  /* Propose for each request. */
  loom_status (*propose)(loom_drafter_t *drafter, loom_draft_request *requests, uint32_t n_requests);
  /* The sequence now holds exactly n_tokens accepted tokens (the drafter rolls back its own state). */
  loom_status (*accepted)(loom_drafter_t *drafter, uint64_t seq_id, uint32_t n_tokens);
  /* Forget the sequence. NULL = stateless drafter. */
  void (*release)(loom_drafter_t *drafter, uint64_t seq_id);
} loom_drafter_i;

#ifdef __cplusplus
}
#endif

#endif /* LOOM_DRAFTER_H */
