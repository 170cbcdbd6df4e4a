// ABI glue for the n-gram drafter. It keeps no per-sequence state: every proposal is computed from
// the tokens the request carries, so accepted() and release() have nothing to undo.
#include <memory>
#include <string>

#include "drafter_support.h"
#include "ngram_lookup.h"

struct loom_drafter {
  loom::drafters::NgramOptions options;
  uint32_t k = 4;
  std::string last_error;
};

namespace loom::drafters {
namespace {

constexpr const char* kName = "ngram";

loom_status ngram_create(const loom_host_services*, const char* config_json, loom_drafter_t** out, char* error,
                         uint32_t error_size) {
  if (out == nullptr) {
    write_error(error, error_size, "ngram create: out is NULL");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  std::string message;
  loom_status status = guarded(&message, [&] {
    const auto config = parse_config(config_json, kName, {"k", "ngram_max", "ngram_min", "model", "temperature", "seed"});
    auto drafter = std::make_unique<loom_drafter>();
    drafter->k = static_cast<uint32_t>(read_int(config, kName, "k", 4, 1, 64));
    drafter->options.ngram_max = static_cast<uint32_t>(read_int(config, kName, "ngram_max", 3, 1, 64));
    drafter->options.ngram_min =
        static_cast<uint32_t>(read_int(config, kName, "ngram_min", 1, 1, drafter->options.ngram_max));
    *out = drafter.release();
  });
  if (status != LOOM_STATUS_OK) write_error(error, error_size, message);
  return status;
}

void ngram_destroy(loom_drafter_t* drafter) { delete drafter; }

const char* ngram_last_error(loom_drafter_t* drafter) { return drafter == nullptr ? "" : drafter->last_error.c_str(); }

loom_status ngram_propose_slot(loom_drafter_t* drafter, loom_draft_request* requests, uint32_t n_requests) {
  if (drafter == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(&drafter->last_error, [&] {
    validate_requests(requests, n_requests);
    for (uint32_t i = 0; i < n_requests; ++i) {
      loom_draft_request& r = requests[i];
      const uint32_t max_draft = std::min(r.max_draft, drafter->k);
      r.n_drafted = ngram_propose(r.tokens, r.n_tokens, r.n_vocab, drafter->options, max_draft, r.out_tokens);
      r.has_probs = 0;
    }
  });
}

loom_status ngram_accepted(loom_drafter_t* drafter, uint64_t, uint32_t) {
  return drafter == nullptr ? LOOM_STATUS_INVALID_ARGUMENT : LOOM_STATUS_OK;
}

void ngram_release(loom_drafter_t*, uint64_t) {}

const loom_drafter_i kTable = {
    sizeof(loom_drafter_i), 0, ngram_create, ngram_destroy, ngram_last_error, ngram_propose_slot, ngram_accepted,
    ngram_release,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc),
    LOOM_ABI_MAJOR,
    LOOM_ABI_MINOR,
    LOOM_PLUGIN_KIND_DRAFTER,
    kName,
    "0.1.0",
    "Prompt-lookup drafter: proposes the tokens that followed the longest recent n-gram match",
    &kTable,
};

}  // namespace
}  // namespace loom::drafters

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::drafters::kDesc;
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
