// The engine's run-time LoRA adapters: [[lora]] read and checked at start, each put in a model slot;
// requests name them (Request::lora), and their sequences keep a prefix cache of their own.
#include <functional>

#include "common/error.h"
#include "engine/engine.h"
#include "lora/lora_adapter.h"

namespace loom {

void Engine::load_loras(const Config& config) {
  if (config.loras.empty()) return;
  const uint32_t n = static_cast<uint32_t>(config.loras.size());
  const uint32_t n_slots = config.model.max_loras > 0 ? static_cast<uint32_t>(config.model.max_loras) : n;
  if (n > n_slots)
    throw Error("[[lora]] names " + std::to_string(n) + " adapters but model.max_loras keeps " + std::to_string(n_slots) +
                " resident; every configured adapter is resident (raise model.max_loras)");
  std::vector<LoraAdapter> adapters;
  int64_t largest = 0;
  for (const LoraSettings& s : config.loras) {
    adapters.push_back(read_lora_adapter(s.path, s.name, model_->info().n_layers));
    largest = std::max(largest, adapters.back().max_rank);
  }
  const int64_t max_rank = config.model.max_lora_rank > 0 ? config.model.max_lora_rank : largest;
  model_->enable_lora(n_slots, static_cast<uint32_t>(max_rank));
  for (uint32_t i = 0; i < n; ++i) {
    const LoraSettings& s = config.loras[i];
    if (adapters[i].max_rank > max_rank)
      throw Error("[[lora]] '" + s.name + "' (" + s.path + "): rank " + std::to_string(adapters[i].max_rank) + " exceeds model.max_lora_rank " +
                  std::to_string(max_rank));
    model_->set_lora(i, adapters[i], static_cast<float>(s.scale));
    // The adapter changes the KV of every token: its sequences share cached blocks only among themselves.
    const uint64_t key = std::hash<std::string>{}(s.name + '\0' + s.path + '\0' + std::to_string(s.scale)) | 1;
    loras_.push_back({s.name, s.path, static_cast<float>(s.scale), static_cast<int32_t>(i), key, adapters[i].max_rank});
  }
}

const Engine::LoraSlot* Engine::find_lora(const std::string& name) const {
  for (const LoraSlot& l : loras_)
    if (l.name == name) return &l;
  return nullptr;
}

std::string Engine::lora_names() const {
  std::string names;
  for (const LoraSlot& l : loras_) names += (names.empty() ? "" : ", ") + l.name;
  return names;
}

}  // namespace loom
