// Shared by the in-tree drafters: error plumbing at the ABI edge, strict config parsing and request
// validation. Header-only so each plugin library stays self-contained.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "loom/drafter.h"

namespace loom::drafters {

// A failure with the status the ABI slot returns.
struct DrafterError : std::runtime_error {
  DrafterError(loom_status s, const std::string& message) : std::runtime_error(message), status(s) {}
  loom_status status;
};

[[noreturn]] inline void fail(loom_status status, const std::string& message) { throw DrafterError(status, message); }

inline void write_error(char* error, uint32_t error_size, const std::string& message) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min<size_t>(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// Runs `body`, mapping every exception to a status and a message (never lets one cross the ABI).
template <class Body>
loom_status guarded(std::string* last_error, Body body) {
  auto record = [&](const std::string& message) {
    if (last_error != nullptr) {
      try {
        *last_error = message;
      } catch (...) {
      }
    }
  };
  try {
    body();
    return LOOM_STATUS_OK;
  } catch (const DrafterError& e) {
    record(e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    record("out of host memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    record(std::string("internal error: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    record("internal error: unknown exception");
    return LOOM_STATUS_INTERNAL;
  }
}

// config_json as an object whose keys are all in `known` (the engine passes the same [drafter]
// keys to every drafter, so each accepts the union and ignores what it does not use).
inline nlohmann::json parse_config(const char* config_json, const char* plugin,
                                   std::initializer_list<const char*> known) {
  const std::string prefix = std::string(plugin) + " config: ";
  nlohmann::json config = nlohmann::json::object();
  if (config_json != nullptr && config_json[0] != '\0') {
    try {
      config = nlohmann::json::parse(config_json);
    } catch (const std::exception& e) {
      fail(LOOM_STATUS_INVALID_ARGUMENT, prefix + "not valid JSON (" + e.what() + ")");
    }
  }
  if (!config.is_object()) fail(LOOM_STATUS_INVALID_ARGUMENT, prefix + "expected a JSON object");
  for (const auto& item : config.items()) {
    bool found = false;
    std::string allowed;
    for (const char* k : known) {
      found = found || item.key() == k;
      allowed += allowed.empty() ? k : std::string(", ") + k;
    }
    if (!found) fail(LOOM_STATUS_INVALID_ARGUMENT, prefix + "unknown key \"" + item.key() + "\" (known: " + allowed + ")");
  }
  return config;
}

inline int64_t read_int(const nlohmann::json& config, const char* plugin, const char* key, int64_t fallback,
                        int64_t lo, int64_t hi) {
  if (!config.contains(key)) return fallback;
  const auto& v = config.at(key);
  const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v.is_number_integer()) fail(LOOM_STATUS_INVALID_ARGUMENT, std::string(plugin) + " config: \"" + key + "\" must be " + range);
  const auto n = v.get<int64_t>();
  if (n < lo || n > hi) {
    fail(LOOM_STATUS_INVALID_ARGUMENT,
         std::string(plugin) + " config: \"" + key + "\" is " + std::to_string(n) + ", must be " + range);
  }
  return n;
}

// The checks every drafter makes on one request before reading it.
inline void validate_request(const loom_draft_request& r, uint32_t index) {
  const std::string where = "request " + std::to_string(index) + ": ";
  if (r.struct_size < sizeof(loom_draft_request)) {
    fail(LOOM_STATUS_INVALID_ARGUMENT, where + "struct_size " + std::to_string(r.struct_size) +
                                           " is smaller than ABI 1.0's " + std::to_string(sizeof(loom_draft_request)));
  }
  if (r.n_tokens == 0) fail(LOOM_STATUS_INVALID_ARGUMENT, where + "n_tokens is 0: there is no sequence to draft from");
  if (r.tokens == nullptr) fail(LOOM_STATUS_INVALID_ARGUMENT, where + "tokens is NULL but n_tokens is " + std::to_string(r.n_tokens));
  if (r.n_vocab == 0) fail(LOOM_STATUS_INVALID_ARGUMENT, where + "n_vocab is 0");
  if (r.max_draft > 0 && r.out_tokens == nullptr) {
    fail(LOOM_STATUS_INVALID_ARGUMENT, where + "out_tokens is NULL but max_draft is " + std::to_string(r.max_draft));
  }
}

inline void validate_requests(const loom_draft_request* requests, uint32_t n_requests) {
  if (requests == nullptr && n_requests > 0) {
    fail(LOOM_STATUS_INVALID_ARGUMENT, "requests is NULL but n_requests is " + std::to_string(n_requests));
  }
  for (uint32_t i = 0; i < n_requests; ++i) validate_request(requests[i], i);
}

}  // namespace loom::drafters
