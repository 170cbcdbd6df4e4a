// The engine's run-time LoRA adapters: [[lora]] read and checked at start, each put in a model slot;
// more loaded and unloaded while the engine runs; requests name them (Request::lora), and their
// sequences keep a prefix cache of their own.
#include <functional>

#include "common/error.h"
#include "engine/engine.h"
#include "lora/lora_adapter.h"
#include "lora/peft_adapter.h"

namespace loom {

namespace {

// The prefix cache of an adapter's sequences: its identity and the load that put it in a slot (a file
// rewritten between two loads must not meet the blocks of the first).
uint64_t cache_key_of(const std::string& name, const std::string& path, float scale, int64_t id) {
  return std::hash<std::string>{}(name + '\0' + path + '\0' + std::to_string(scale) + '\0' + std::to_string(id)) | 1;
}

// A PEFT folder (adapter_config.json beside adapter_model.safetensors) or llama.cpp's GGUF adapter.
LoraAdapter read_adapter(const std::string& path, const std::string& name, const ModelInfo& info) {
  if (is_peft_adapter_dir(path)) return read_peft_adapter(path, name, info);
  return read_lora_adapter(path, name, info.n_layers);
}

}  // namespace

void Engine::load_loras(const Config& config) {
  const uint32_t n = static_cast<uint32_t>(config.loras.size());
  if (n == 0 && config.model.max_loras == 0) return;
  const uint32_t n_slots = config.model.max_loras > 0 ? static_cast<uint32_t>(config.model.max_loras) : n;
  if (n > n_slots)
    throw Error("[[lora]] names " + std::to_string(n) + " adapters but model.max_loras keeps " + std::to_string(n_slots) +
                " resident; every configured adapter is resident (raise model.max_loras)");
  std::vector<LoraAdapter> adapters;
  int64_t largest = 0;
  for (const LoraSettings& s : config.loras) {
    adapters.push_back(read_adapter(s.path, s.name, model_->info()));
    largest = std::max(largest, adapters.back().max_rank);
  }
  const int64_t max_rank = config.model.max_lora_rank > 0 ? config.model.max_lora_rank : largest;
  if (max_rank == 0) throw Error("model.max_loras reserves slots for adapters loaded later: set model.max_lora_rank, the largest rank they may have");
  model_->enable_lora(n_slots, static_cast<uint32_t>(max_rank));
  lora_users_.assign(n_slots, 0);
  lora_clearing_.assign(n_slots, false);
  for (uint32_t i = 0; i < n; ++i) {
    const LoraSettings& s = config.loras[i];
    if (adapters[i].max_rank > max_rank)
      throw Error("[[lora]] '" + s.name + "' (" + s.path + "): rank " + std::to_string(adapters[i].max_rank) + " exceeds model.max_lora_rank " +
                  std::to_string(max_rank));
    model_->set_lora(i, adapters[i], static_cast<float>(s.scale));
    const int64_t id = next_lora_id_++;
    // The adapter changes the KV of every token: its sequences share cached blocks only among themselves.
    loras_.push_back({s.name, s.path, static_cast<float>(s.scale), static_cast<int32_t>(i), cache_key_of(s.name, s.path, float(s.scale), id),
                      adapters[i].max_rank, id});
  }
}

std::vector<Engine::LoraSlot> Engine::loras() const {
  std::lock_guard lock(lora_mutex_);
  return loras_;
}

std::optional<Engine::LoraSlot> Engine::find_lora(const std::string& name) const {
  std::lock_guard lock(lora_mutex_);
  for (const LoraSlot& l : loras_)
    if (l.name == name) return l;
  return std::nullopt;
}

std::string Engine::lora_names() const {
  std::lock_guard lock(lora_mutex_);
  std::string names;
  for (const LoraSlot& l : loras_) names += (names.empty() ? "" : ", ") + l.name;
  return names;
}

Engine::LoraSlot Engine::load_lora(const std::string& name, const std::string& path, float scale) {
  if (name.empty()) throw Error("an adapter needs a name");
  if (name == info_.model_name) throw Error("'" + name + "' is the served model's name");
  if (!(scale >= 0.0f) || scale > 100.0f) throw Error("an adapter's scale must be from 0 to 100");
  const uint32_t n_slots = model_->lora_slots();
  if (n_slots == 0) throw Error("this engine keeps no adapter slots (set model.max_loras and model.max_lora_rank)");
  // Read and check the file before taking anything: it may be large, and the engine keeps running.
  const LoraAdapter adapter = read_adapter(path, name, model_->info());
  if (adapter.max_rank > int64_t(model_->max_lora_rank()))
    throw Error(path + ": rank " + std::to_string(adapter.max_rank) + " exceeds model.max_lora_rank " + std::to_string(model_->max_lora_rank()));
  LoraSlot loaded;
  {
    std::lock_guard lock(lora_mutex_);
    for (const LoraSlot& l : loras_)
      if (l.name == name) throw Error("an adapter named '" + name + "' is loaded already");
    int32_t free_slot = -1;
    for (uint32_t s = 0; s < n_slots && free_slot < 0; ++s) {
      const bool held = std::any_of(loras_.begin(), loras_.end(), [&](const LoraSlot& l) { return l.slot == int32_t(s); });
      if (!held && lora_users_[s] == 0 && !lora_clearing_[s]) free_slot = int32_t(s);
    }
    if (free_slot < 0) throw Error("all " + std::to_string(n_slots) + " adapter slots are taken (model.max_loras); unload one first");
    const int64_t id = next_lora_id_++;
    loaded = {name, path, scale, free_slot, cache_key_of(name, path, scale, id), adapter.max_rank, id};
  }
  {
    std::lock_guard step_lock(step_mutex_);  // the stacks change between two steps, never during one
    model_->set_lora(uint32_t(loaded.slot), adapter, scale);
  }
  std::lock_guard lock(lora_mutex_);
  loras_.push_back(loaded);
  return loaded;
}

void Engine::unload_lora(const std::string& name) {
  LoraSlot gone;
  {
    std::unique_lock lock(lora_mutex_);
    const auto it = std::find_if(loras_.begin(), loras_.end(), [&](const LoraSlot& l) { return l.name == name; });
    if (it == loras_.end()) throw Error("no adapter named '" + name + "' is loaded");
    gone = *it;
    loras_.erase(it);  // new requests naming it are refused from here on
    lora_clearing_[size_t(gone.slot)] = true;  // and no load takes its slot before it is empty
    lora_released_.wait(lock, [&] { return lora_users_[size_t(gone.slot)] == 0; });
  }
  {
    std::lock_guard step_lock(step_mutex_);
    model_->clear_lora(uint32_t(gone.slot));
  }
  std::lock_guard lock(lora_mutex_);
  lora_clearing_[size_t(gone.slot)] = false;
}

}  // namespace loom
