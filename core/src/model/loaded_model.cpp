#include "model/loaded_model.h"

#include <chrono>

#include "hf/hf_checkpoint.h"
#include "model/default_model.h"

namespace loom {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

LoadedModel load_model(const Config& config, LoadProgress on_progress) {
  const auto start = Clock::now();
  LoadedModel loaded;
  loaded.path = config.model.path.empty() ? default_model_path() : std::filesystem::path(config.model.path);
  loaded.file = std::make_unique<gguf::GgufFile>(hf::open_model_file(loaded.path));
  loaded.tokenizer = Tokenizer::from_gguf(*loaded.file);
  loaded.backend = Backend::create(find_backend_plugin(config, config.backend.name), backend_config_json(config));
  loaded.model = Model::load(*loaded.file, *loaded.backend, ModelOptions{config.model.n_ctx, std::move(on_progress)});
  loaded.load_seconds = seconds_since(start);
  return loaded;
}

}  // namespace loom
