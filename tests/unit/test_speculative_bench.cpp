// Hidden benchmark (not run by default; speed belongs in benchmarks, not in pass/fail tests):
//   loom_unit_tests "[.bench][speculative]"
// Greedy decode of an input-grounded task ("copy this passage") on the default model, without
// speculation, with the n-gram drafter and with a draft model (the default model drafting for
// itself: the only model at hand sharing its vocabulary, so acceptance is an upper bound and the
// speed is not). Prints decode tokens/s, speed-up, acceptance; asserts only identical output.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include "engine/engine.h"
#include "model/default_model.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace {

const char* kPassage =
    "The river rose slowly through the night, and by morning the low fields east of the village were under "
    "a sheet of brown water. Farmers moved their animals to the ridge, where the old stone church stood, "
    "and the schoolteacher opened the building so that families could sleep in the classrooms. By noon the "
    "rain had stopped, but the water kept coming, carried down from the hills by a hundred small streams. "
    "The mayor walked the length of the embankment twice, counting sandbags and speaking to every volunteer.";

struct Run {
  std::vector<int32_t> tokens;
  double decode_seconds = 0;
  loom::EngineStats stats;
};

Run run(const std::string& kind, const std::filesystem::path& model, uint32_t max_tokens) {
  loom::Config config;
  config.plugins.search_path = {loom::test::plugin_build_dir().string()};
  config.backend.threads = 2;
  config.model.n_ctx = 2048;
  config.kv.memory_bytes = 256ll << 20;
  config.drafter.kind = kind;
  config.drafter.k = 6;
  if (kind == "draft_model") config.drafter.model = model.string();
  loom::Engine engine(config, model);
  const std::string text = std::string("Here is a passage:\n\n") + kPassage +
                           "\n\nHere is the same passage, copied exactly, word for word:\n\n";
  Run r;
  loom::Request request;
  request.prompt = engine.tokenizer().encode(text, true, false);
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  request.sampling.params = engine.default_sampling();
  request.sampling.params.temperature = 0.0f;
  loom::Clock::time_point first{}, last{};
  request.on_event = [&](const loom::RequestEvent& e) {
    if (e.tokens.empty()) return;
    if (r.tokens.empty()) first = loom::Clock::now();
    last = loom::Clock::now();
    r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
  };
  engine.submit(std::move(request));
  while (engine.n_unfinished() > 0) engine.step();
  r.decode_seconds = std::chrono::duration<double>(last - first).count();
  r.stats = engine.stats();
  return r;
}

}  // namespace

TEST_CASE("speculative decoding speed on a copy task (default model, CPU, batch 1)", "[.bench][speculative]") {
  const auto model = loom::find_default_model();
  if (!model) {
    WARN("default model not installed; skipping");
    return;
  }
  const uint32_t max_tokens = 128;
  const Run plain = run("none", *model, max_tokens);
  const double plain_tps = double(plain.tokens.size() - 1) / plain.decode_seconds;
  std::printf("none         %6.1f tok/s\n", plain_tps);
  for (const std::string kind : {"ngram", "draft_model"}) {
    const Run spec = run(kind, *model, max_tokens);
    const double tps = double(spec.tokens.size() - 1) / spec.decode_seconds;
    std::printf("%-12s %6.1f tok/s  speed-up %.2fx  proposed %llu  accepted %llu  acceptance %.2f  tokens/verification %.2f\n",
                kind.c_str(), tps, tps / plain_tps, (unsigned long long)spec.stats.draft_tokens_proposed,
                (unsigned long long)spec.stats.draft_tokens_accepted, spec.stats.draft_acceptance_rate(),
                spec.stats.tokens_per_verification());
    CHECK(spec.tokens == plain.tokens);
  }
}
