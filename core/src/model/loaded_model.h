// A model opened with its tokenizer on the configured backend, for tools that drive a Model
// directly (perplexity). Generation goes through the Engine (core/src/engine/engine.h).
#pragma once

#include <filesystem>
#include <memory>

#include "backend/backend.h"
#include "config/config.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace loom {

struct LoadedModel {
  std::filesystem::path path;
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  double load_seconds = 0.0;
};

// config.model.path (or the default model when empty) on config.backend. loom::Error on failure.
LoadedModel load_model(const Config& config, LoadProgress on_progress = {});

}  // namespace loom
