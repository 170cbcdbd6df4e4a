/*
 * One small greedy sampler, compiled several times with a different TP_* defect each, so the loader
 * tests see real libraries that are broken in exactly one way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/sampler.h"

struct loom_sampler {
  char last_error[128];
};
struct loom_sampler_state {
  uint64_t seed;
};

static void copy_message(char *dst, uint32_t size, const char *message) {
  if (dst == NULL || size == 0) return;
  snprintf(dst, size, "%s", message);
}

static loom_status tp_create(const loom_host_services *host, const char *config_json, loom_sampler_t **out,
                             char *error, uint32_t error_size) {
  (void)host;
#ifdef TP_FAILS_INIT
  (void)config_json;
  (void)out;
  copy_message(error, error_size, "deliberate initialisation failure (test plugin)");
  return LOOM_STATUS_INTERNAL;
#else
  if (config_json == NULL || config_json[0] != '{') {
    copy_message(error, error_size, "config_json must be a JSON object");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = (loom_sampler_t *)calloc(1, sizeof(loom_sampler_t));
  return *out ? LOOM_STATUS_OK : LOOM_STATUS_OUT_OF_MEMORY;
#endif
}

static void tp_destroy(loom_sampler_t *s) { free(s); }
static const char *tp_last_error(loom_sampler_t *s) { return s->last_error; }

static loom_status tp_state_create(loom_sampler_t *s, uint64_t seed, loom_sampler_state_t **out) {
  (void)s;
  *out = (loom_sampler_state_t *)calloc(1, sizeof(loom_sampler_state_t));
  if (*out == NULL) return LOOM_STATUS_OUT_OF_MEMORY;
  (*out)->seed = seed;
  return LOOM_STATUS_OK;
}

static void tp_state_destroy(loom_sampler_t *s, loom_sampler_state_t *state) {
  (void)s;
  free(state);
}

static loom_status tp_sample(loom_sampler_t *s, loom_sample_row *rows, uint32_t n_rows, uint32_t n_vocab) {
  (void)s;
  for (uint32_t r = 0; r < n_rows; ++r) {
    int32_t best = 0;
    for (uint32_t i = 1; i < n_vocab; ++i) {
      if (rows[r].logits[i] > rows[r].logits[best]) best = (int32_t)i;
    }
    rows[r].token = best;
  }
  return LOOM_STATUS_OK;
}

/* A table that a plugin built against a newer header would have: the 1.0 table plus more slots. */
static const struct {
  loom_sampler_i base;
  void *future_slots[4];
} tp_table = {
    {
#if defined(TP_SMALL_TABLE)
        16,
#elif defined(TP_BIG_TABLE)
        sizeof(loom_sampler_i) + 4 * sizeof(void *),
#else
        sizeof(loom_sampler_i),
#endif
        0, tp_create, tp_destroy, tp_last_error, NULL, NULL, tp_state_create, tp_state_destroy,
#ifdef TP_NULL_MANDATORY
        NULL
#else
        tp_sample
#endif
    },
    {NULL, NULL, NULL, NULL}};

static const loom_plugin_desc tp_desc = {sizeof(loom_plugin_desc),
#ifdef TP_WRONG_MAJOR
                                         LOOM_ABI_MAJOR + 1,
#else
                                         LOOM_ABI_MAJOR,
#endif
#ifdef TP_BIG_TABLE
                                         LOOM_ABI_MINOR + 5,
#else
                                         LOOM_ABI_MINOR,
#endif
                                         LOOM_PLUGIN_KIND_SAMPLER,
                                         TP_NAME,
                                         "0.0.1",
                                         "test plugin: " TP_NAME,
                                         &tp_table.base};

#ifdef TP_NO_ENTRY
LOOM_PLUGIN_ENTRY_DECL loom_status not_the_entry_point(const loom_host_version *host, const loom_plugin_desc **out) {
#else
LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version *host, const loom_plugin_desc **out) {
#endif
  *out = &tp_desc;
  if (host == NULL || host->abi_major != tp_desc.abi_major) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
