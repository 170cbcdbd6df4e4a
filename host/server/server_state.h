// ServerWide — what the whole server shares; ServerState — what one served model's handlers share:
// the engine, the settings, the chat template, the admission counter and the requests in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "chat/chat_template.h"
#include "config/config.h"
#include "engine/engine.h"
#include "server/managed_server.h"

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

// Why the server cancelled a request, for /metrics (loom_requests_cancelled_total{reason}).
enum class CancelReason { client_disconnected, shutdown, choice_failed };

inline const char* cancel_reason_name(CancelReason reason) {
  switch (reason) {
    case CancelReason::client_disconnected: return "client_disconnected";
    case CancelReason::shutdown: return "shutdown";
    case CancelReason::choice_failed: return "choice_failed";
  }
  return "unknown";
}

// Where the chat template came from, so /v1/models and the chat page can say when Loom's built-in
// template stands in for a model that has none (such a model is often a base model that never learnt
// to chat; completions still serve it well).
struct ChatTemplateOrigin {
  enum class Kind { model, builtin_fallback, configured };
  Kind kind = Kind::model;
  std::string note;  // builtin_fallback: the start-up line's explanation
};

// What every model's handlers share: the server's own settings, the HTTP counters and connection
// figures for /metrics, the exchanges in flight and the stopping flag (set once, for all models).
struct ServerWide {
  explicit ServerWide(ServerSettings s) : settings(std::move(s)), created(static_cast<int64_t>(std::time(nullptr))) {}

  const ServerSettings settings;
  const int64_t created;  // server start, Unix seconds
  // HTTP exchanges not yet completely written (a stream counts until its last byte).
  std::atomic<int64_t> n_active_http{0};
  std::atomic<bool> stopping{false};
  HttpCounters http_counters;
  // Open sockets and what the connection limits closed or refused (set by HttpServer).
  std::function<ConnectionCounts()> connection_counts;
};

// One served model: its engine, its names, its chat template, its admission counter and the
// registry of its requests in flight (for shutdown and for /metrics' cancellations).
struct ServerState {
  ServerState(ServerWide& w, Engine& e, ServerSettings s, std::string name, chat::ChatTemplate tmpl, int64_t seed,
              ChatTemplateOrigin origin = {})
      : server(w), engine(e), settings(std::move(s)), model_name(std::move(name)), chat_template(std::move(tmpl)),
        template_origin(std::move(origin)), default_seed(seed), created(static_cast<int64_t>(std::time(nullptr))) {}

  ServerWide& server;
  Engine& engine;
  const ServerSettings settings;  // the server's, with this model's model_name and model_aliases
  const std::string model_name;
  const chat::ChatTemplate chat_template;
  const ChatTemplateOrigin template_origin;
  const int64_t default_seed;  // [sampler] seed; -1 = a fresh random seed per request
  const int64_t created;       // when this model was loaded, Unix seconds (the model's "created")

  // Engine requests submitted through this server and not finished yet; admission control compares
  // it with settings.max_queue.
  std::atomic<int64_t> n_unfinished{0};

  // Engine ids in flight, so a shutdown past its deadline can cancel them (their clients then get a
  // clear error instead of a cut connection).
  void track(RequestId id) {
    std::lock_guard lock(ids_mutex_);
    in_flight_.insert(id);
  }
  // Called with each request's final event; a cancelled one is counted under the reason it was
  // cancelled for.
  void untrack(RequestId id, FinishReason finish) {
    std::lock_guard lock(ids_mutex_);
    in_flight_.erase(id);
    auto reason = cancel_reasons_.find(id);
    if (finish == FinishReason::cancelled) {
      ++cancelled_by_reason_[reason != cancel_reasons_.end() ? cancel_reason_name(reason->second) : "engine_stopped"];
    }
    if (reason != cancel_reasons_.end()) cancel_reasons_.erase(reason);
  }
  void cancel(RequestId id, CancelReason reason) {
    {
      std::lock_guard lock(ids_mutex_);
      if (!in_flight_.count(id)) return;  // already finished: nothing to cancel, nothing to count
      cancel_reasons_.emplace(id, reason);
    }
    engine.cancel(id);
  }
  void cancel_all(CancelReason reason) {
    std::set<RequestId> ids;
    {
      std::lock_guard lock(ids_mutex_);
      ids = in_flight_;
    }
    for (RequestId id : ids) cancel(id, reason);
  }
  std::map<std::string, uint64_t> cancelled_by_reason() const {
    std::lock_guard lock(ids_mutex_);
    return cancelled_by_reason_;
  }

 private:
  mutable std::mutex ids_mutex_;
  std::set<RequestId> in_flight_;
  std::map<RequestId, CancelReason> cancel_reasons_;
  std::map<std::string, uint64_t> cancelled_by_reason_;
};

// Counts an HTTP exchange as active for as long as it lives.
class ActiveGuard {
 public:
  explicit ActiveGuard(ServerWide& server) : server_(server) { ++server_.n_active_http; }
  ~ActiveGuard() { --server_.n_active_http; }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;

 private:
  ServerWide& server_;
};

}  // namespace loom::server
