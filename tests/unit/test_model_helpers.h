// Shared by the [model] tests: synthetic models on disk and CPU backends from the build's plugins.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "gguf/synth_model.h"
#include "test_paths.h"

namespace loom::test {

inline Config model_test_config() {
  Config config;
  config.plugins.search_path = {plugin_build_dir().string()};
  return config;
}

// {"threads": 2} (fast) or {"reference": true}.
inline std::unique_ptr<Backend> cpu_backend(bool reference = false) {
  return Backend::create(find_backend_plugin(model_test_config(), "cpu"),
                         reference ? R"({"reference": true})" : R"({"threads": 2})");
}

// A small synthetic model of `arch` (llama | qwen2 | qwen3 | gemma2 | gemma3), written once per spec into the
// scratch folder. Deterministic: the same spec gives the same bytes.
inline gguf::SynthSpec small_spec(const std::string& arch, loom_dtype weights = LOOM_DTYPE_F32, uint64_t seed = 3) {
  gguf::SynthSpec spec;
  spec.arch = arch;
  // gemma3: five local layers and one global; gemma4: two global, the last three sharing KV.
  spec.n_layers = arch == "gemma3" || arch == "gemma4" ? 6 : 2;
  spec.dim = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = arch == "gemma3" ? 32 : 0;  // gemma's head_dim is not dim / n_heads
  spec.ff_dim = 128;
  spec.n_vocab = 384;
  spec.n_ctx = 256;
  spec.weight_type = weights;
  spec.seed = seed;
  if (arch == "gemma3" || arch == "gemma2" || arch == "gemma4" || arch == "gpt-oss") spec.sliding_window = 8;  // small, so short tests cross the window
  return spec;
}

// A deterministic prompt of n tokens inside a 300-token range of small vocabularies; `salt` varies it.
inline std::vector<int32_t> prompt_tokens(int n, int salt = 0) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(3 + (i * 37 + salt * 11) % 300);
  return tokens;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

inline std::filesystem::path write_small_model(const gguf::SynthSpec& spec, const std::string& tag) {
  const auto dir = std::filesystem::path(LOOM_BINARY_DIR) / "test-scratch" / ("model-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / (tag + ".gguf");
  gguf::write_synthetic_model(spec, path);
  return path;
}

}  // namespace loom::test
