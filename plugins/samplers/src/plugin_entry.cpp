// The ABI edge: loom_plugin_query and the loom_sampler_i slots. Every slot catches everything, so no
// exception ever crosses into the host.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "loom/sampler.h"
#include "sampler_instance.h"

namespace loom::samplers {
namespace {

void copy_error(const std::string& message, char* error, uint32_t error_size) {
  if (error == nullptr || error_size == 0) return;
  std::snprintf(error, error_size, "%s", message.c_str());
}

void set_error(loom_sampler* sampler, const std::string& message) {
  std::lock_guard<std::mutex> lock(sampler->error_mutex);
  sampler->last_error = message;
}

// Runs `body`, turning exceptions into a status and, when there is an instance, its last_error.
template <class Body>
loom_status guarded(loom_sampler* sampler, Body body) {
  try {
    body();
    return LOOM_STATUS_OK;
  } catch (const SamplerError& e) {
    if (sampler != nullptr) set_error(sampler, e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    if (sampler != nullptr) set_error(sampler, "out of host memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    if (sampler != nullptr) set_error(sampler, std::string("internal error: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    if (sampler != nullptr) set_error(sampler, "internal error: unknown exception");
    return LOOM_STATUS_INTERNAL;
  }
}

loom_status sampler_create(const loom_host_services* host, const char* config_json, loom_sampler_t** out,
                           char* error, uint32_t error_size) {
  if (out == nullptr) {
    copy_error("create: out is NULL", error, error_size);
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    auto sampler = std::make_unique<loom_sampler>();
    sampler->host = host;
    sampler->config = parse_config(config_json);
    *out = sampler.release();
    return LOOM_STATUS_OK;
  } catch (const SamplerError& e) {
    copy_error(e.what(), error, error_size);
    return e.status;
  } catch (const std::bad_alloc&) {
    copy_error("out of host memory", error, error_size);
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    copy_error(std::string("internal error: ") + e.what(), error, error_size);
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    copy_error("internal error: unknown exception", error, error_size);
    return LOOM_STATUS_INTERNAL;
  }
}

void sampler_destroy(loom_sampler_t* sampler) { delete sampler; }

const char* sampler_last_error(loom_sampler_t* sampler) {
  if (sampler == nullptr) return "";
  std::lock_guard<std::mutex> lock(sampler->error_mutex);
  return sampler->last_error.c_str();
}

loom_status sampler_default_params(loom_sampler_t* sampler, loom_sampling_params* out) {
  if (sampler == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(sampler, [&] {
    // A caller compiled against an older (smaller) struct gets the prefix it knows about.
    const uint32_t size = out->struct_size < sizeof(loom_sampling_params) ? out->struct_size
                                                                          : uint32_t{sizeof(loom_sampling_params)};
    if (size < sizeof(uint32_t)) fail_invalid("default_params: out->struct_size is not set");
    std::memcpy(reinterpret_cast<char*>(out) + sizeof(uint32_t),
                reinterpret_cast<const char*>(&sampler->config.defaults) + sizeof(uint32_t), size - sizeof(uint32_t));
  });
}

loom_status sampler_validate_params(loom_sampler_t* sampler, const loom_sampling_params* params) {
  if (sampler == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(sampler, [&] {
    if (params == nullptr) fail_invalid("params is NULL");
    validate_params(*params, "params");
  });
}

loom_status sampler_state_create(loom_sampler_t* sampler, uint64_t seed, loom_sampler_state_t** out) {
  if (sampler == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(sampler, [&] {
    // The instance's salt moves every stream at once; salt 0 leaves the request seed as it is.
    *out = new loom_sampler_state(seed ^ (sampler->config.seed_salt * 0x9e3779b97f4a7c15ull));
  });
}

void sampler_state_destroy(loom_sampler_t*, loom_sampler_state_t* state) { delete state; }

loom_status sampler_sample(loom_sampler_t* sampler, loom_sample_row* rows, uint32_t n_rows, uint32_t n_vocab) {
  if (sampler == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(sampler, [&] { sample_rows(*sampler, rows, n_rows, n_vocab); });
}

const loom_sampler_i k_table = {
    sizeof(loom_sampler_i), 0,
    sampler_create,         sampler_destroy,
    sampler_last_error,     sampler_default_params,
    sampler_validate_params, sampler_state_create,
    sampler_state_destroy,  sampler_sample,
};

const loom_plugin_desc k_desc = {
    sizeof(loom_plugin_desc),
    LOOM_ABI_MAJOR,
    LOOM_ABI_MINOR,
    LOOM_PLUGIN_KIND_SAMPLER,
    "samplers",
    "0.1.0",
    "Reference sampling chain: penalties, logit bias, top-k, top-p, min-p, typical-p, temperature",
    &k_table,
};

}  // namespace
}  // namespace loom::samplers

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::samplers::k_desc;  // written even on refusal, so the host can say what we wanted
  if (host == nullptr || host->struct_size < sizeof(uint32_t) * 2) return LOOM_STATUS_INVALID_ARGUMENT;
  if (host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
