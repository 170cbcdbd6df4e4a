// The prefix cache's disk tier through the engine ([kv] disk_cache_path): an engine started over the
// folder another engine filled loads the blocks of a known prefix instead of computing them, and
// every request still gets the tokens and logits of a cold prefill, with or without window rings. A
// corrupt file is skipped: the blocks are computed again.
#include <catch2/catch.hpp>

#include <fstream>

#include "engine/engine.h"
#include "gguf/synth_model.h"
#include "test_engine_helpers.h"
#include "test_model_helpers.h"

namespace {

using namespace loom::test;

std::filesystem::path model_for(const std::string& arch) {
  static std::map<std::string, std::filesystem::path> paths;
  auto& path = paths[arch];
  if (path.empty()) {
    auto spec = small_spec(arch);
    spec.n_vocab = 512;  // prompt_of draws tokens below 503
    spec.n_ctx = 512;
    if (arch == "gpt-oss") spec.expert_ff_dim = 64;
    path = write_small_model(spec, arch + "-disk");
  }
  return path;
}

// Window rings of a few blocks (an 8-token window, 6-row chunks), as in test_engine_window.cpp.
loom::Config config_for(const std::string& sliding_layers, const std::filesystem::path& disk) {
  auto config = engine_config();
  config.kv.sliding_layers = sliding_layers;
  config.kv.window_chunk_tokens = 6;
  config.kv.disk_cache_path = disk.string();
  return config;
}

struct Result {
  Outcome outcome;
  std::vector<loom::TokenLogprob> logprobs;
};

Result run_one(loom::Engine& engine, const std::vector<int32_t>& prompt) {
  Result r;
  auto request = greedy_request(prompt, 6, &r.outcome, engine);
  request.n_logprobs = 4;
  request.want_logprobs = true;
  auto forward = request.on_event;
  request.on_event = [forward, out = &r.logprobs](const loom::RequestEvent& e) {
    out->insert(out->end(), e.logprobs.begin(), e.logprobs.end());
    forward(e);
  };
  engine.submit(std::move(request));
  run_until_done(engine);
  return r;
}

void check_same(const Result& got, const Result& expected) {
  CHECK(got.outcome.error.empty());
  CHECK(got.outcome.tokens == expected.outcome.tokens);
  REQUIRE(got.logprobs.size() == expected.logprobs.size());
  for (size_t step = 0; step < got.logprobs.size(); ++step) {
    const auto& a = got.logprobs[step].top;
    const auto& b = expected.logprobs[step].top;
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      INFO("step " << step << ", alternative " << k);
      CHECK(a[k].first == b[k].first);
      CHECK(a[k].second == Approx(b[k].second).margin(1e-4));
    }
  }
}

// A first turn, its next turn (the first 9 blocks of 4 tokens shared) and a prompt sharing 5 blocks.
struct Prompts {
  std::vector<int32_t> turn, next_turn, partial;
  Prompts() {
    turn = prompt_of(620, 37);
    next_turn = turn;
    const auto more = prompt_of(621, 24);
    next_turn.insert(next_turn.end(), more.begin() + 1, more.end());
    partial.assign(turn.begin(), turn.begin() + 21);
    const auto other = prompt_of(622, 20);
    partial.insert(partial.end(), other.begin() + 1, other.end());
  }
};

}  // namespace

TEST_CASE("a restarted engine loads a known prefix from the disk tier and gets a cold prefill's logits", "[engine][disk_tier]") {
  const auto [arch, sliding_layers] = GENERATE(table<std::string, std::string>(
      {{"llama", "auto"}, {"gemma3", "window"}, {"gemma3", "full"}, {"gpt-oss", "window"}}));
  INFO(arch << ", sliding layers " << sliding_layers);
  const auto disk = scratch_dir("engine-disk-tier");
  const Prompts p;

  auto cold_config = config_for(sliding_layers, "");
  cold_config.kv.prefix_caching = false;
  loom::Engine cold(cold_config, model_for(arch));
  const Result cold_next = run_one(cold, p.next_turn);
  const Result cold_partial = run_one(cold, p.partial);
  CHECK(cold.stats().disk_tier == false);

  {
    loom::Engine first(config_for(sliding_layers, disk), model_for(arch));
    const Result turn = run_one(first, p.turn);
    CHECK(turn.outcome.n_cached == 0);
  }  // written through before the engine is gone

  loom::Engine restarted(config_for(sliding_layers, disk), model_for(arch));
  CHECK(restarted.stats().disk.files == 10);  // the prompt's 37 tokens and 3 generated: 10 full blocks
  const Result next = run_one(restarted, p.next_turn);
  check_same(next, cold_next);
  CHECK(next.outcome.n_cached == 36);  // every block the two share, from disk
  // Only 5 blocks in common: memory holds them but keeps no ring there; the disk has the window.
  const Result partial = run_one(restarted, p.partial);
  check_same(partial, cold_partial);
  CHECK(partial.outcome.n_cached == 20);
  const auto stats = restarted.stats();
  CHECK(stats.disk.blocks_read >= 9);
  CHECK(stats.disk_cached_tokens >= 36);
  CHECK(stats.disk.files_rejected == 0);
}

// A hybrid model (a Gated DeltaNet layer, then attention): the recurrent state is saved where the
// allocator checkpoints it, at the prompt's last full block, and a restarted engine resumes there;
// a prompt sharing only part of the way has no state on disk to resume from and computes it all.
TEST_CASE("a restarted engine resumes a hybrid model's prompt from the recurrent state on disk", "[engine][disk_tier]") {
  static const std::filesystem::path model = [] {
    loom::gguf::SynthSpec spec;
    spec.arch = "qwen35";
    spec.n_layers = 2;
    spec.dim = 64;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.ff_dim = 128;
    spec.n_vocab = 512;
    spec.n_ctx = 512;
    spec.seed = 7;
    return write_small_model(spec, "qwen35-disk");
  }();
  const auto disk = scratch_dir("engine-disk-tier-hybrid");
  const Prompts p;
  auto cold_config = config_for("auto", "");
  cold_config.kv.prefix_caching = false;
  loom::Engine cold(cold_config, model);
  const Result cold_next = run_one(cold, p.next_turn);
  const Result cold_partial = run_one(cold, p.partial);
  {
    loom::Engine first(config_for("auto", disk), model);
    run_one(first, p.turn);
  }
  loom::Engine restarted(config_for("auto", disk), model);
  CHECK(restarted.stats().disk.files == 11);  // 10 blocks of the attention layer, the state at token 36
  const Result next = run_one(restarted, p.next_turn);
  check_same(next, cold_next);
  CHECK(next.outcome.n_cached == 36);
  const Result partial = run_one(restarted, p.partial);
  check_same(partial, cold_partial);
  CHECK(partial.outcome.n_cached == 0);
  CHECK(restarted.stats().disk.blocks_read == 10);  // 9 blocks and the state
}

TEST_CASE("the engine computes again the blocks whose disk files are corrupt", "[engine][disk_tier]") {
  const std::string arch = GENERATE(as<std::string>{}, "llama", "gemma3");
  INFO(arch);
  const auto disk = scratch_dir("engine-disk-tier-corrupt");
  const Prompts p;
  auto cold_config = config_for("window", "");
  cold_config.kv.prefix_caching = false;
  loom::Engine cold(cold_config, model_for(arch));
  const Result cold_next = run_one(cold, p.next_turn);
  {
    loom::Engine first(config_for("window", disk), model_for(arch));
    run_one(first, p.turn);
  }
  // Every block file gets one flipped payload byte.
  for (const auto& entry : std::filesystem::directory_iterator(disk)) {
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(64 + 17);
    const char byte = static_cast<char>(f.get());
    f.seekp(64 + 17);
    f.put(static_cast<char>(byte ^ 0x40));
  }
  loom::Engine restarted(config_for("window", disk), model_for(arch));
  const Result next = run_one(restarted, p.next_turn);
  check_same(next, cold_next);
  CHECK(next.outcome.n_cached == 0);
  CHECK(restarted.stats().disk.files_rejected >= 1);
  CHECK(restarted.stats().disk.blocks_read == 0);
}
