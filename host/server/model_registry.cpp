#include "server/model_registry.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "server/api_error.h"

namespace loom::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

ApiError shutting_down() { return ApiError(503, "the server is shutting down", std::nullopt, "server_error", "shutting_down"); }

}  // namespace

LoadedModel::~LoadedModel() {
  // No request holds it: the registry unloads a model only once its leases are gone.
  if (engine) engine->stop(false);
  if (on_unload) on_unload();
  state.reset();
}

const char* model_status_name(ModelStatus status) {
  switch (status) {
    case ModelStatus::unloaded: return "unloaded";
    case ModelStatus::loading: return "loading";
    case ModelStatus::loaded: return "loaded";
    case ModelStatus::unloading: return "unloading";
  }
  return "unknown";
}

ApiError ModelRegistry::load_failed(const Slot& slot) {
  return ApiError(500, "loading the model '" + slot.settings.name + "' failed: " + slot.last_error, "model", "server_error",
                  "model_load_failed");
}

ApiError ModelRegistry::too_large(const Slot& slot) const {
  return ApiError(500, "the model '" + slot.settings.name + "' needs " + mib(slot.bytes()) + ", more than [server] memory_budget (" +
                           mib(static_cast<uint64_t>(server_.settings.memory_budget)) + ")",
                  "model", "server_error", "model_too_large");
}

bool ModelRegistry::Slot::answers_to(const std::string& name) const {
  return settings.name == name || std::find(settings.aliases.begin(), settings.aliases.end(), name) != settings.aliases.end();
}

ModelRegistry::ModelRegistry(ServerWide& server, std::vector<Entry> entries, Loader loader)
    : server_(server), loader_(std::move(loader)) {
  if (entries.empty()) throw Error("no model to serve");
  const uint64_t budget = static_cast<uint64_t>(server_.settings.memory_budget);
  for (Entry& entry : entries) {
    if (budget > 0 && entry.estimated_bytes > budget) {
      throw Error("the model '" + entry.settings.name + "' (" + entry.settings.path + ") needs about " + mib(entry.estimated_bytes) +
                  " (weights and KV pool) but [server] memory_budget is " + mib(budget) +
                  ": it cannot be served even alone (raise the budget, or lower its kv_memory)");
    }
    Slot slot;
    slot.settings = std::move(entry.settings);
    slot.estimated_bytes = entry.estimated_bytes;
    slots_.push_back(std::move(slot));
  }
  if (server_.settings.idle_unload > 0) idle_thread_ = std::thread([this] { unload_idle_models(); });
}

ModelRegistry::~ModelRegistry() { unload_all(); }

void ModelRegistry::preload() {
  std::unique_lock lock(mutex_);
  const uint64_t budget = static_cast<uint64_t>(server_.settings.memory_budget);
  for (Slot& slot : slots_) {
    if (!slot.settings.preload || slot.status != ModelStatus::unloaded) continue;
    if (budget > 0 && resident_bytes() + slot.bytes() > budget)
      throw Error("the preloaded models need more than [server] memory_budget (" + mib(budget) + ") together: '" + slot.settings.name +
                  "' does not fit beside the ones before it");
    load(slot, lock);
  }
}

ModelRegistry::Slot* ModelRegistry::find(const std::string& requested) {
  if (requested.empty()) return &slots_.front();
  for (Slot& slot : slots_) {
    if (slot.answers_to(requested)) return &slot;
  }
  // A run-time adapter names its base model's slot (the adapter is applied per request), loaded or not.
  for (Slot& slot : slots_) {
    if (slot.status == ModelStatus::loaded && slot.loaded->engine->find_lora(requested)) return &slot;
    for (const RuntimeAdapter& adapter : slot.adapters)
      if (adapter.name == requested) return &slot;
  }
  return nullptr;
}

void ModelRegistry::remember_adapter(RuntimeAdapter adapter) {
  std::lock_guard lock(mutex_);
  std::vector<RuntimeAdapter>& adapters = slots_.front().adapters;
  std::erase_if(adapters, [&](const RuntimeAdapter& a) { return a.name == adapter.name; });
  adapters.push_back(std::move(adapter));
}

void ModelRegistry::forget_adapter(const std::string& name) {
  std::lock_guard lock(mutex_);
  std::erase_if(slots_.front().adapters, [&](const RuntimeAdapter& a) { return a.name == name; });
}

std::vector<std::string> ModelRegistry::names() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> all;
  for (const Slot& slot : slots_) {
    all.push_back(slot.settings.name);
    all.insert(all.end(), slot.settings.aliases.begin(), slot.settings.aliases.end());
  }
  for (const Slot& slot : slots_) {
    if (slot.status == ModelStatus::loaded) {
      for (const auto& lora : slot.loaded->engine->loras()) all.push_back(lora.name);
    } else {
      for (const RuntimeAdapter& adapter : slot.adapters) all.push_back(adapter.name);
    }
  }
  return all;
}

uint64_t ModelRegistry::resident_bytes() const {
  uint64_t total = 0;
  for (const Slot& slot : slots_) {
    if (slot.status != ModelStatus::unloaded) total += slot.bytes();
  }
  return total;
}

ModelLease ModelRegistry::lease(Slot& slot) {
  ++slot.leases;
  slot.last_used = Clock::now();
  return ModelLease(slot.loaded->state.get(), [this, &slot](ServerState*) { release(slot); });
}

void ModelRegistry::release(Slot& slot) {
  std::lock_guard lock(mutex_);
  --slot.leases;
  slot.last_used = Clock::now();
  changed_.notify_all();
}

ModelLease ModelRegistry::acquire(const std::string& requested) {
  std::unique_lock lock(mutex_);
  Slot* slot = find(requested);
  if (slot == nullptr) {
    lock.unlock();
    std::string listed;
    for (const auto& name : names()) listed += (listed.empty() ? "'" : ", '") + name + "'";
    throw ApiError(404, "the model '" + requested + "' does not exist; this server serves " + listed, "model", "invalid_request_error",
                   "model_not_found");
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(server_.settings.model_swap_wait));
  const auto busy = [&] {
    ApiError error(503, "the model '" + slot->settings.name + "' is not in memory and the models that are have not finished their requests within " +
                            "[server] model_swap_wait; retry shortly",
                   "model", "server_error", "model_busy");
    error.set_retry_after(std::max<int64_t>(1, static_cast<int64_t>(server_.settings.model_swap_wait + 0.999)));
    return error;
  };
  for (;;) {
    if (server_.stopping || closing_) throw shutting_down();
    switch (slot->status) {
      case ModelStatus::loaded:
        return lease(*slot);
      case ModelStatus::loading: {  // one load serves every request waiting for it, and its failure every one too
        const uint64_t failures = slot->load_failures;
        changed_.wait(lock, [&] { return slot->status != ModelStatus::loading || server_.stopping; });
        if (slot->load_failures != failures) throw load_failed(*slot);
        break;
      }
      case ModelStatus::unloading:  // draining to make room for another model: wait for it to go, then load it again
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && slot->status == ModelStatus::unloading) throw busy();
        break;
      case ModelStatus::unloaded:
        if (!make_room(*slot, lock, deadline)) throw busy();
        if (slot->status == ModelStatus::unloaded) load(*slot, lock);
        break;
    }
  }
}

ModelLease ModelRegistry::peek(const std::string& requested) {
  std::lock_guard lock(mutex_);
  Slot* slot = find(requested);
  if (slot == nullptr || slot->status != ModelStatus::loaded) return nullptr;
  return look(*slot);
}

ModelLease ModelRegistry::look(Slot& slot) {
  ++slot.leases;  // a look: the model stays while it is read, and its last use is unchanged
  return ModelLease(slot.loaded->state.get(), [this, &slot](ServerState*) {
    std::lock_guard relock(mutex_);
    --slot.leases;
    changed_.notify_all();
  });
}

std::vector<ModelLease> ModelRegistry::in_memory() {
  std::lock_guard lock(mutex_);
  std::vector<ModelLease> held;
  for (Slot& slot : slots_) {
    if (slot.loaded) held.push_back(look(slot));  // loaded, or draining for another model
  }
  return held;
}

bool ModelRegistry::make_room(Slot& slot, std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
  const uint64_t budget = static_cast<uint64_t>(server_.settings.memory_budget);
  const auto fits = [&] { return budget == 0 || resident_bytes() + slot.bytes() <= budget; };
  if (budget > 0 && slot.bytes() > budget) throw too_large(slot);  // no wait can help
  for (;;) {
    if (slot.status != ModelStatus::unloaded) return true;  // another request has started its load
    if (server_.stopping || closing_) throw shutting_down();
    // While another load evicts, the room it makes is its own: wait for its load to claim it.
    if (making_room_) {
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return false;
      continue;
    }
    if (fits()) return true;  // the caller's load claims the room in this same hold of the lock
    // Idle models first, then busy ones, each least recently used first.
    std::vector<Slot*> candidates;
    for (Slot& other : slots_) {
      if (other.status == ModelStatus::loaded) candidates.push_back(&other);
    }
    std::sort(candidates.begin(), candidates.end(), [](const Slot* a, const Slot* b) {
      if ((a->leases > 0) != (b->leases > 0)) return a->leases == 0;
      return a->last_used < b->last_used;
    });
    std::vector<Slot*> victims;
    uint64_t freed = 0;
    for (Slot* candidate : candidates) {
      if (resident_bytes() - freed + slot.bytes() <= budget) break;
      victims.push_back(candidate);
      freed += candidate->bytes();
    }
    if (resident_bytes() - freed + slot.bytes() > budget) {  // models still loading hold the rest
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return false;
      continue;
    }
    making_room_ = true;
    for (Slot* victim : victims) victim->status = ModelStatus::unloading;  // no new requests: they wait
    changed_.notify_all();
    const bool drained = changed_.wait_until(lock, deadline, [&] {
      return server_.stopping || std::all_of(victims.begin(), victims.end(), [](const Slot* v) { return v->leases == 0; });
    });
    if (!drained || server_.stopping) {
      for (Slot* victim : victims) victim->status = ModelStatus::loaded;  // they keep serving
      making_room_ = false;
      changed_.notify_all();
      if (server_.stopping) throw shutting_down();
      return false;
    }
    for (Slot* victim : victims) unload(*victim, lock, UnloadReason::budget);
    making_room_ = false;
    changed_.notify_all();
  }
  return true;
}

void ModelRegistry::load(Slot& slot, std::unique_lock<std::mutex>& lock) {
  slot.status = ModelStatus::loading;
  changed_.notify_all();
  const std::vector<RuntimeAdapter> adapters = slot.adapters;
  lock.unlock();
  const auto start = Clock::now();
  std::unique_ptr<LoadedModel> model;
  std::string error;
  try {
    model = loader_(slot.settings);
    for (const RuntimeAdapter& adapter : adapters) {
      try {
        model->engine->load_lora(adapter.name, adapter.path, adapter.scale);
      } catch (const std::exception& e) {  // its file went away: the model serves without it
        std::fprintf(stderr, "loom serve: adapter '%s' of model '%s' not loaded again: %s\n", adapter.name.c_str(),
                     slot.settings.name.c_str(), e.what());
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an unknown error";
  }
  const uint64_t budget = static_cast<uint64_t>(server_.settings.memory_budget);
  if (model && budget > 0 && model->resident_bytes > budget) {
    // Its estimate was low (a KV pool sized by memory_fraction): it could never share the budget.
    error = "it holds " + mib(model->resident_bytes) + " once loaded, more than [server] memory_budget (" + mib(budget) + ")";
    model.reset();
  }
  lock.lock();
  if (!model) {
    slot.status = ModelStatus::unloaded;
    ++slot.load_failures;
    slot.last_error = error;
    changed_.notify_all();
    throw load_failed(slot);
  }
  slot.loaded = std::move(model);
  slot.estimated_bytes = slot.loaded->resident_bytes;  // the budget counts what it really holds from now on
  slot.status = ModelStatus::loaded;
  ++slot.loads;
  slot.last_load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  slot.last_used = Clock::now();
  std::fprintf(stderr, "loom serve: model '%s' loaded in %.2f s (%s resident)\n", slot.settings.name.c_str(),
               slot.last_load_seconds, mib(slot.loaded->resident_bytes).c_str());
  changed_.notify_all();
}

void ModelRegistry::unload(Slot& slot, std::unique_lock<std::mutex>& lock, UnloadReason reason) {
  slot.status = ModelStatus::unloading;
  std::unique_ptr<LoadedModel> model = std::move(slot.loaded);
  lock.unlock();
  model.reset();  // stops the engine; its weights and KV pool are freed
  lock.lock();
  slot.status = ModelStatus::unloaded;
  ++(reason == UnloadReason::budget ? slot.unloads_budget : slot.unloads_idle);
  std::fprintf(stderr, "loom serve: model '%s' unloaded (%s)\n", slot.settings.name.c_str(),
               reason == UnloadReason::budget ? "room for another model" : "idle");
  changed_.notify_all();
}

void ModelRegistry::unload_idle_models() {
  const auto idle = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(server_.settings.idle_unload));
  const auto period = std::clamp<Clock::duration>(idle / 4, std::chrono::milliseconds(50), std::chrono::seconds(1));
  std::unique_lock lock(mutex_);
  while (!closing_) {
    changed_.wait_for(lock, period);
    for (Slot& slot : slots_) {
      if (closing_) break;
      if (slot.status == ModelStatus::loaded && slot.leases == 0 && Clock::now() - slot.last_used >= idle)
        unload(slot, lock, UnloadReason::idle);
    }
  }
}

std::vector<ModelView> ModelRegistry::models() {
  std::vector<ModelView> views;
  std::vector<Slot*> loaded;
  {
    std::lock_guard lock(mutex_);
    for (Slot& slot : slots_) {
      ModelView view;
      view.name = slot.settings.name;
      view.aliases = slot.settings.aliases;
      view.status = slot.status;
      view.bytes = slot.bytes();
      view.requests = slot.leases;
      view.loads = slot.loads;
      view.load_failures = slot.load_failures;
      view.unloads_budget = slot.unloads_budget;
      view.unloads_idle = slot.unloads_idle;
      view.last_load_seconds = slot.last_load_seconds;
      view.last_error = slot.last_error;
      views.push_back(std::move(view));
    }
  }
  for (ModelView& view : views) {
    if (view.status == ModelStatus::loaded) view.state = peek(view.name);
  }
  return views;
}

void ModelRegistry::stop_admitting() {
  std::lock_guard lock(mutex_);
  server_.stopping = true;
  changed_.notify_all();
}

int64_t ModelRegistry::unfinished() {
  int64_t total = 0;
  for (const ModelLease& model : in_memory()) total += model->n_unfinished.load();
  return total;
}

void ModelRegistry::cancel_all(CancelReason reason) {
  for (const ModelLease& model : in_memory()) model->cancel_all(reason);
}

void ModelRegistry::unload_all() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
    changed_.notify_all();
  }
  if (idle_thread_.joinable()) idle_thread_.join();
  std::unique_lock lock(mutex_);
  for (Slot& slot : slots_) {
    if (slot.status != ModelStatus::loaded) continue;
    changed_.wait(lock, [&] { return slot.leases == 0; });
    std::unique_ptr<LoadedModel> model = std::move(slot.loaded);
    slot.status = ModelStatus::unloaded;
    lock.unlock();
    model.reset();
    lock.lock();
  }
}

}  // namespace loom::server
