#include "bench_embeddings.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "embed/text_encoder.h"
#include "gguf/gguf_file.h"
#include "hf/hf_checkpoint.h"
#include "gguf/synth_model.h"

namespace loom::host {

int run_embedding_bench(const Config& config, const std::filesystem::path& given_model, int rounds, const std::string& json_path) {
  std::filesystem::path model_path = given_model;
  if (model_path.empty()) {  // all-MiniLM-L6-v2's shape, random weights
    model_path = std::filesystem::temp_directory_path() / "loom-bench-minilm-l6-shaped.gguf";
    gguf::SynthSpec spec;
    spec.arch = "bert";
    spec.n_layers = 6, spec.dim = 384, spec.n_heads = 12, spec.n_kv_heads = 12, spec.ff_dim = 1536, spec.n_vocab = 30522, spec.n_ctx = 512;
    spec.weight_type = LOOM_DTYPE_F16;
    gguf::write_synthetic_model(spec, model_path);
  }
  const gguf::GgufFile file = hf::open_model_file(model_path);
  auto backend = Backend::create(find_backend_plugin(config, config.backend.name), backend_config_json(config));
  auto encoder = embed::TextEncoder::load(file, *backend, config.scheduler.max_batched_tokens);
  const embed::TextEncoderInfo& m = encoder->info();
  // 256 inputs of 16 to 256 tokens (at most the model's context), [CLS] ... [SEP] around random ids.
  std::mt19937 rng(37);
  std::vector<std::vector<int32_t>> inputs(256);
  int64_t n_tokens = 0;
  const int64_t longest = std::min<int64_t>(256, std::min(m.n_ctx_train, encoder->max_tokens()));
  for (auto& input : inputs) {
    const int64_t length = std::uniform_int_distribution<int64_t>(std::min<int64_t>(16, longest), longest)(rng);
    input.push_back(int32_t(std::min<int64_t>(101, m.n_vocab - 1)));
    while (int64_t(input.size()) + 1 < length) input.push_back(int32_t(std::uniform_int_distribution<int64_t>(0, m.n_vocab - 1)(rng)));
    input.push_back(int32_t(std::min<int64_t>(102, m.n_vocab - 1)));
    n_tokens += int64_t(input.size());
  }
  encoder->embed({inputs[0]}, true);  // warm
  std::vector<double> seconds;
  for (int r = 0; r < rounds; r++) {
    const auto start = std::chrono::steady_clock::now();
    const auto out = encoder->embed(inputs, true);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (out.size() != inputs.size()) throw std::runtime_error("the encoder returned " + std::to_string(out.size()) + " embeddings");
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2], tps = double(n_tokens) / median;
  std::printf("model      %s (%s, %lld layers of %lld, %s pooling)\n", model_path.string().c_str(), m.arch.c_str(),
              static_cast<long long>(m.n_layers), static_cast<long long>(m.dim), embed::pooling_name(m.pooling));
  std::printf("inputs     256 of 16-%lld tokens, %lld tokens, batches of up to %lld rows, backend %s\n", static_cast<long long>(longest),
              static_cast<long long>(n_tokens), static_cast<long long>(encoder->max_tokens()), backend->name().c_str());
  std::printf("embed      %.0f tokens/s (%.3f s for all, median of %d)\n", tps, median, rounds);
  if (!json_path.empty()) {
    std::ofstream(json_path) << nlohmann::json{{"model", model_path.string()}, {"inputs", 256}, {"tokens", n_tokens},
                                               {"seconds", median}, {"tokens_per_second", tps}}.dump(2)
                             << "\n";
  }
  return 0;
}

}  // namespace loom::host
