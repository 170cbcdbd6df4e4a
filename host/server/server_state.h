// ServerState — what every HTTP handler shares: the engine, the settings, the chat template, the
// admission counters and the registry of requests in flight (for shutdown).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "chat/chat_template.h"
#include "config/config.h"
#include "engine/engine.h"

namespace loom::server {

// HTTP responses by route and status, for /metrics.
class HttpCounters {
 public:
  void count(const std::string& route, int status) {
    std::lock_guard lock(mutex_);
    ++counts_[{route, status}];
  }
  std::map<std::pair<std::string, int>, uint64_t> snapshot() const {
    std::lock_guard lock(mutex_);
    return counts_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
};

struct ServerState {
  ServerState(Engine& e, ServerSettings s, std::string name, chat::ChatTemplate tmpl, int64_t seed)
      : engine(e), settings(std::move(s)), model_name(std::move(name)), chat_template(std::move(tmpl)),
        default_seed(seed), created(static_cast<int64_t>(std::time(nullptr))) {}

  Engine& engine;
  const ServerSettings settings;
  const std::string model_name;
  const chat::ChatTemplate chat_template;
  const int64_t default_seed;  // [sampler] seed; -1 = a fresh random seed per request
  const int64_t created;       // server start, Unix seconds (the model's "created")

  // Engine requests submitted through this server and not finished yet; admission control compares
  // it with settings.max_queue.
  std::atomic<int64_t> n_unfinished{0};
  // HTTP exchanges not yet completely written (a stream counts until its last byte).
  std::atomic<int64_t> n_active_http{0};
  std::atomic<bool> stopping{false};
  HttpCounters http_counters;

  // Engine ids in flight, so a shutdown past its deadline can cancel them (their clients then get a
  // clear error instead of a cut connection).
  void track(RequestId id) {
    std::lock_guard lock(ids_mutex_);
    in_flight_.insert(id);
  }
  void untrack(RequestId id) {
    std::lock_guard lock(ids_mutex_);
    in_flight_.erase(id);
  }
  void cancel_all() {
    std::set<RequestId> ids;
    {
      std::lock_guard lock(ids_mutex_);
      ids = in_flight_;
    }
    for (RequestId id : ids) engine.cancel(id);
  }

 private:
  std::mutex ids_mutex_;
  std::set<RequestId> in_flight_;
};

// Counts an HTTP exchange as active for as long as it lives.
class ActiveGuard {
 public:
  explicit ActiveGuard(ServerState& state) : state_(state) { ++state_.n_active_http; }
  ~ActiveGuard() { --state_.n_active_http; }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;

 private:
  ServerState& state_;
};

}  // namespace loom::server
