// Loading one chat or completion model for `loom serve`: its configuration as a [[models]] entry
// sees it, the memory the budget counts for it, and the engine with its chat template and serving
// state (ModelRegistry's loader).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "config/config.h"
#include "server/model_registry.h"

namespace loom::server {

// The configuration one [[models]] entry runs with: the shared sections, with what the entry sets.
Config config_for_model(const Config& shared, const ModelEntrySettings& entry);

// What the budget counts for a model before it is loaded: its weights' bytes on disk (the file, or a
// Hugging Face folder's safetensors) and the KV pool its configuration asks for.
uint64_t estimate_model_bytes(const Config& config);

// Loads the model of `config` (its [model] path) on the configured backend and makes its serving
// state. loom::Error naming the problem.
// `show_progress`: a progress bar while the weights load (start-up).
std::unique_ptr<LoadedModel> load_served_model(ServerWide& server, const Config& config, const ModelEntrySettings& entry,
                                               bool show_progress);

}  // namespace loom::server
