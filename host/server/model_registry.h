// ModelRegistry — the models one server serves ([[models]], or the single model of [model]) and which
// of them are in memory, as llama-server's router mode, Ollama and llama-swap do it, in one process.
//
// A request leases its model for as long as it runs (a stream until its last byte). A model that is
// not in memory is loaded by the first request that names it; requests arriving meanwhile wait for
// that one load. Under [server] memory_budget a load first unloads the least recently used idle
// models; when only busy ones could make room, they stop taking new requests (those wait) and are
// unloaded once their last request ends. A request that waits longer than [server] model_swap_wait
// for that gets 503 with Retry-After: never a hang. A model idle for [server] idle_unload is unloaded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "server/api_error.h"
#include "server/server_state.h"

namespace loom::server {

// A model in memory: its engine and the state its handlers share.
struct LoadedModel {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ServerState> state;
  uint64_t resident_bytes = 0;  // what it holds against the budget: weights and KV pool
  std::function<void()> on_unload;  // detaches what was attached to the engine (KV event publishing)
  ~LoadedModel();
};

// Keeps its model in memory while held.
using ModelLease = std::shared_ptr<ServerState>;

enum class ModelStatus { unloaded, loading, loaded, unloading };
const char* model_status_name(ModelStatus status);

// Why a model left memory, for /metrics (loom_model_unloads_total{reason}).
enum class UnloadReason { budget, idle };

// One model as /v1/models and /metrics show it.
struct ModelView {
  std::string name;
  std::vector<std::string> aliases;
  ModelStatus status = ModelStatus::unloaded;
  ModelLease state;  // while loaded (a look that does not count as use)
  uint64_t bytes = 0;  // resident bytes when loaded, else the estimate the budget uses
  int64_t requests = 0;  // leases held now
  uint64_t loads = 0, load_failures = 0, unloads_budget = 0, unloads_idle = 0;
  double last_load_seconds = 0.0;
  std::string last_error;  // why the last load failed
};

class ModelRegistry {
 public:
  struct Entry {
    ModelEntrySettings settings;
    uint64_t estimated_bytes = 0;  // weights' file bytes + KV pool, before the first load
  };
  using Loader = std::function<std::unique_ptr<LoadedModel>(const ModelEntrySettings&)>;

  // Throws loom::Error when a model could not fit in the budget even alone (naming both).
  ModelRegistry(ServerWide& server, std::vector<Entry> entries, Loader loader);
  ~ModelRegistry();
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // Loads the entries marked preload (the single model of [model] is one); throws what the load threw.
  void preload();
  // The model a request names ("" = the first), loading it if needed. ApiError: 404 naming the
  // models when the name is unknown, 503 with Retry-After when busy models keep it out, 500 when
  // its load fails, 503 while shutting down.
  ModelLease acquire(const std::string& requested);
  // The model if it is in memory now (nothing is loaded, nothing counts as use), else null.
  ModelLease peek(const std::string& requested);
  // Every model, in configuration order.
  std::vector<ModelView> models();
  // Every name a request may use (models, their aliases, the loaded models' adapters), for 404s.
  std::vector<std::string> names();
  const std::string& default_name() const { return slots_.front().settings.name; }
  bool several() const { return slots_.size() > 1; }

  // Shutdown: new requests get 503, and those waiting for a model stop waiting.
  void stop_admitting();
  // Shutdown: requests admitted and not finished, over every model; cancel them all.
  int64_t unfinished();
  void cancel_all(CancelReason reason);
  // Unloads every model (after the HTTP server has stopped).
  void unload_all();

  ServerWide& server() { return server_; }

  // Adapters loaded at run time (/v1/load_lora_adapter) into the first model: remembered, so a model
  // unloaded under the budget (or when idle) gets them again when it loads, and a request naming one
  // loads its model as a request naming the model does.
  struct RuntimeAdapter {
    std::string name, path;
    float scale = 1.0f;
  };
  void remember_adapter(RuntimeAdapter adapter);
  void forget_adapter(const std::string& name);

 private:
  struct Slot {
    ModelEntrySettings settings;
    uint64_t estimated_bytes = 0;
    ModelStatus status = ModelStatus::unloaded;
    std::unique_ptr<LoadedModel> loaded;
    int64_t leases = 0;
    std::chrono::steady_clock::time_point last_used{};
    uint64_t loads = 0, load_failures = 0, unloads_budget = 0, unloads_idle = 0;
    double last_load_seconds = 0.0;
    std::string last_error;
    std::vector<RuntimeAdapter> adapters;  // the first slot's run-time adapters, in load order
    bool answers_to(const std::string& name) const;
    uint64_t bytes() const { return loaded ? loaded->resident_bytes : estimated_bytes; }
  };

  Slot* find(const std::string& requested);  // with mutex_ held; null when unknown
  ModelLease look(Slot& slot);               // with mutex_ held: a hold that is not a use
  std::vector<ModelLease> in_memory();       // every model with an engine, draining ones too
  static ApiError load_failed(const Slot& slot);
  ApiError too_large(const Slot& slot) const;
  uint64_t resident_bytes() const;           // with mutex_ held: loaded, loading and unloading slots
  ModelLease lease(Slot& slot);              // with mutex_ held
  void release(Slot& slot);
  // With `lock` held: make room for `slot` under the budget, unloading idle models and draining
  // busy ones until `deadline`; false when the busy ones did not finish in time.
  bool make_room(Slot& slot, std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline);
  void load(Slot& slot, std::unique_lock<std::mutex>& lock);
  void unload(Slot& slot, std::unique_lock<std::mutex>& lock, UnloadReason reason);
  void unload_idle_models();

  ServerWide& server_;
  Loader loader_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a status or a lease count changed
  bool making_room_ = false;         // one eviction at a time, so two loads never pick the same victims
  bool closing_ = false;
  std::thread idle_thread_;
};

}  // namespace loom::server
