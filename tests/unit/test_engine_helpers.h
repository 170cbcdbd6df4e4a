// Shared by the [engine] tests: an engine config over the in-tree plugins, deterministic prompts, and
// greedy requests whose events are collected into an Outcome.
#pragma once

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/synth_model.h"
#include "test_paths.h"

namespace loom::test {

inline loom::Config engine_config(int64_t kv_bytes = 8ll << 20, int64_t max_batched = 64) {
  loom::Config config;
  config.plugins.search_path = {loom::test::plugin_build_dir().string()};
  config.backend.threads = 2;
  config.kv.memory_bytes = kv_bytes;
  config.kv.block_size = 4;
  config.kv.dtype = "f32";
  config.scheduler.max_batched_tokens = max_batched;
  config.scheduler.max_num_seqs = 16;
  return config;
}

// The [engine] tests' synthetic model of `arch`: 2 layers, 64 wide, 4 query heads over 2 KV heads, a
// 512-token vocabulary and context. Callers adjust what their case needs.
inline loom::gguf::SynthSpec engine_spec(const std::string& arch = "llama", uint64_t seed = 7) {
  loom::gguf::SynthSpec spec;
  spec.arch = arch;
  spec.n_layers = 2;
  spec.dim = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.ff_dim = 128;
  spec.n_vocab = 512;
  spec.n_ctx = 512;
  spec.seed = seed;
  return spec;
}

inline std::vector<int32_t> prompt_of(uint32_t seed, size_t length) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens = {1};  // BOS
  while (tokens.size() < length) tokens.push_back(static_cast<int32_t>(3 + rng() % 500));
  return tokens;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  loom::FinishReason finish = loom::FinishReason::none;
  uint32_t n_cached = 0;
  std::string error;
};

inline loom::Request greedy_request(std::vector<int32_t> prompt, uint32_t max_tokens, Outcome* out, const loom::Engine& engine) {
  loom::Request request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.ignore_eos = true;  // a random model may emit EOS anywhere; compare full lengths
  request.sampling.params = engine.default_sampling();
  request.sampling.params.temperature = 0.0f;
  request.on_event = [out](const loom::RequestEvent& e) {
    out->tokens.insert(out->tokens.end(), e.tokens.begin(), e.tokens.end());
    out->text += e.text;
    if (e.finish != loom::FinishReason::none) {
      out->finish = e.finish;
      out->n_cached = e.n_cached_tokens;
      out->error = e.error;
    }
  };
  return request;
}

inline void run_until_done(loom::Engine& engine) {
  for (int guard = 0; engine.n_unfinished() > 0; ++guard) {
    REQUIRE(guard < 100000);
    engine.step();
  }
}

}  // namespace loom::test
