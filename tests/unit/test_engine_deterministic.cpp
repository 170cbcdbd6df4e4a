// [engine] deterministic: seeded, sampled requests give the same tokens alone and in any batch (mixed
// with other requests, prompts cut into chunks, prefixes reused), and the engine refuses the mode
// where it cannot hold it.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "common/error.h"
#include "engine/engine.h"
#include "gguf/synth_model.h"
#include "test_engine_helpers.h"
#include "test_paths.h"

namespace {

using namespace loom::test;

// Q4_0 matrices: the CPU backend's batched paths (tiles, panels, float GEMM) and its decode kernel
// each round and sum these in their own order, unless the mode holds them to one.
std::filesystem::path quantized_model(const std::string& arch = "llama") {
  static std::map<std::string, std::filesystem::path> paths;
  auto& path = paths[arch];
  if (path.empty()) {
    loom::gguf::SynthSpec spec = engine_spec(arch, 11);
    spec.dim = 128;
    spec.ff_dim = 256;
    spec.weight_type = LOOM_DTYPE_Q4_0;
    path = scratch_dir("deterministic-" + arch) / (arch + "-q4_0.gguf");
    loom::gguf::write_synthetic_model(spec, path);
  }
  return path;
}

loom::Config deterministic_config(int64_t max_batched) {
  loom::Config config = engine_config(8ll << 20, max_batched);
  config.engine.deterministic = true;
  config.scheduler.prefill_tokens_while_decoding = 16;  // prompts beside decoding streams go in chunks
  return config;
}

// Sampled from the whole distribution (no cut-offs), so a last-bit change of a logit can change a token.
loom::Request seeded_request(const loom::Engine& engine, std::vector<int32_t> prompt, uint64_t seed, uint32_t max_tokens,
                             Outcome* out) {
  loom::Request request = greedy_request(std::move(prompt), max_tokens, out, engine);
  request.sampling.params.temperature = 1.0f;
  request.sampling.params.top_k = 0;
  request.sampling.params.top_p = 1.0f;
  request.sampling.params.min_p = 0.0f;
  request.sampling.seed = seed;
  return request;
}

std::vector<int32_t> prompt_for(size_t i) { return prompt_of(900 + uint32_t(i % 11), 5 + (i * 7) % 40); }

}  // namespace

TEST_CASE("deterministic mode: 16 seeded requests give the same tokens alone and in mixed batches", "[engine]") {
  const size_t n = 16;
  const uint32_t max_tokens = 24;
  std::vector<Outcome> alone(n);
  {
    loom::Engine engine(deterministic_config(64), quantized_model());
    REQUIRE(engine.info().device_name.find("batch-invariant") != std::string::npos);
    for (size_t i = 0; i < n; i++) {
      engine.submit(seeded_request(engine, prompt_for(i), 1000 + i, max_tokens, &alone[i]));
      run_until_done(engine);
    }
  }
  // Sampled, not collapsed onto one likely continuation: the requests' answers are distinct.
  std::set<std::vector<int32_t>> distinct;
  for (const Outcome& o : alone) distinct.insert(o.tokens);
  CHECK(distinct.size() == n);

  // Together, with unseeded requests arriving while they run and a step budget that cuts prompts
  // into chunks: everything a request computes is batched with something else.
  for (const int64_t max_batched : {64, 24}) {
    INFO("max_batched_tokens " << max_batched);
    loom::Engine engine(deterministic_config(max_batched), quantized_model());
    std::vector<Outcome> together(n), noise(6);
    for (size_t i = 0; i < n; i++) engine.submit(seeded_request(engine, prompt_for(i), 1000 + i, max_tokens, &together[i]));
    for (size_t j = 0; j < noise.size(); j++) {
      for (int s = 0; s < 3; s++) engine.step();
      loom::Request other = seeded_request(engine, prompt_of(50 + uint32_t(j), 8 + 9 * j), 0, 10 + uint32_t(j), &noise[j]);
      other.sampling.seed.reset();
      engine.submit(std::move(other));
    }
    run_until_done(engine);
    for (size_t i = 0; i < n; i++) {
      INFO("request " << i);
      REQUIRE(together[i].tokens.size() == max_tokens);
      CHECK(together[i].tokens == alone[i].tokens);
    }
  }
}

TEST_CASE("deterministic mode is refused where it cannot hold", "[engine]") {
  SECTION("a backend without batch-invariant results") {
    loom::Config config = deterministic_config(64);
    config.backend.options["reference"] = true;  // the CPU plugin's plain loops do not claim it
    REQUIRE_THROWS_WITH(loom::Engine(config, quantized_model()),
                        Catch::Contains("[engine] deterministic") && Catch::Contains("batch-invariant"));
  }
  SECTION("a drafter, whose drafts per step follow the batch's token budget") {
    loom::Config config = deterministic_config(64);
    config.drafter.kind = "ngram";
    REQUIRE_THROWS_WITH(loom::Engine(config, quantized_model()), Catch::Contains("[drafter] kind = 'ngram'"));
  }
  SECTION("a model with recurrent layers") {
    loom::Config config = deterministic_config(64);
    const auto path = scratch_dir("deterministic-hybrid") / "qwen35-tiny.gguf";
    loom::gguf::write_synthetic_model(engine_spec("qwen35"), path);
    REQUIRE_THROWS_WITH(loom::Engine(config, path), Catch::Contains("recurrent layers"));
  }
}
