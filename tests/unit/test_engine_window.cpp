// Window rings ([kv] sliding_layers = "window"): sliding-window layers keep only each running
// sequence's last window (kv_cache.h). Whatever the rings do (wrap around many times in a long
// prompt, run out, resume a cached prompt from a checkpoint, hold rejected drafts), every request
// must get the tokens and logits it gets from a cache that keeps every token ("full").
#include <catch2/catch.hpp>

#include <map>

#include "engine/engine.h"
#include "gguf/synth_model.h"
#include "test_engine_helpers.h"
#include "test_model_helpers.h"

namespace {

using namespace loom::test;

// The families with sliding-window layers, small: an 8-token window, so rings of a few blocks wrap
// many times within a prompt.
std::filesystem::path windowed_model(const std::string& arch) {
  static std::map<std::string, std::filesystem::path> paths;
  auto& path = paths[arch];
  if (path.empty()) {
    auto spec = small_spec(arch);
    spec.n_vocab = 512;  // prompt_of draws tokens below 503
    spec.n_ctx = 512;
    if (arch == "gpt-oss") spec.expert_ff_dim = 64;
    path = write_small_model(spec, arch + "-window");
  }
  return path;
}

// Rings of window + chunk - 1 = 8 + 5 tokens, 4 blocks of 4: a 50-token prompt overwrites each ring
// block three times.
loom::Config window_config(const std::string& sliding_layers) {
  auto config = engine_config();
  config.kv.sliding_layers = sliding_layers;
  config.kv.window_chunk_tokens = 6;
  return config;
}

struct Run {
  std::vector<Outcome> outcomes;
  std::vector<std::vector<loom::TokenLogprob>> logprobs;
};

// Submits `groups` of prompts, each group together, running each until done.
Run run(loom::Engine& engine, const std::vector<std::vector<std::vector<int32_t>>>& groups, uint32_t max_tokens) {
  size_t total = 0;
  for (const auto& g : groups) total += g.size();
  Run r;
  r.outcomes.resize(total);
  r.logprobs.resize(total);
  size_t i = 0;
  for (const auto& group : groups) {
    for (const auto& prompt : group) {
      auto request = greedy_request(prompt, max_tokens, &r.outcomes[i], engine);
      request.n_logprobs = 4;
      request.want_logprobs = true;
      auto forward = request.on_event;
      request.on_event = [forward, out = &r.logprobs[i]](const loom::RequestEvent& e) {
        out->insert(out->end(), e.logprobs.begin(), e.logprobs.end());
        forward(e);
      };
      engine.submit(std::move(request));
      ++i;
    }
    run_until_done(engine);
  }
  return r;
}

void check_same(const Run& got, const Run& expected) {
  REQUIRE(got.outcomes.size() == expected.outcomes.size());
  for (size_t i = 0; i < got.outcomes.size(); ++i) {
    INFO("request " << i);
    CHECK(got.outcomes[i].error.empty());
    CHECK(got.outcomes[i].finish == loom::FinishReason::length);
    CHECK(got.outcomes[i].tokens == expected.outcomes[i].tokens);
    REQUIRE(got.logprobs[i].size() == expected.logprobs[i].size());
    for (size_t step = 0; step < got.logprobs[i].size(); ++step) {
      const auto& a = got.logprobs[i][step].top;
      const auto& b = expected.logprobs[i][step].top;
      REQUIRE(a.size() == b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        INFO("step " << step << ", alternative " << k);
        CHECK(a[k].first == b[k].first);
        // The same keys in the same order, only stored elsewhere: float noise at most.
        CHECK(a[k].second == Approx(b[k].second).margin(1e-4));
      }
    }
  }
}

}  // namespace

TEST_CASE("window rings give every request the tokens and logits of a cache that keeps every token", "[engine][window]") {
  const std::string arch = GENERATE(as<std::string>{}, "gemma2", "gemma3", "gemma4", "gpt-oss");
  INFO(arch);
  // Three prompts together, longer than a ring, then a fourth alone.
  const std::vector<std::vector<std::vector<int32_t>>> groups = {
      {prompt_of(500, 50), prompt_of(501, 23), prompt_of(502, 41)}, {prompt_of(503, 61)}};
  loom::Engine full(window_config("full"), windowed_model(arch));
  loom::Engine window(window_config("window"), windowed_model(arch));
  CHECK(full.info().kv_window_rings == 0);
  CHECK(window.info().kv_window_rings > 0);
  CHECK(window.info().kv_window_ring_tokens == 16);
  // The pool serves only the full-attention layers, so the same memory holds more tokens.
  CHECK(window.info().kv_capacity_tokens > full.info().kv_capacity_tokens * 5 / 4);
  const auto expected = run(full, groups, 12);
  const auto got = run(window, groups, 12);
  check_same(got, expected);
  CHECK(window.stats().kv_blocks_used == 0);
}

TEST_CASE("more requests than window rings wait for one and lose nothing", "[engine][window]") {
  const std::string arch = GENERATE(as<std::string>{}, "gemma3", "gpt-oss");
  INFO(arch);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 5; ++i) prompts.push_back(prompt_of(510 + i, 20 + 7 * i));
  auto config = window_config("window");
  config.kv.window_seqs = 2;
  loom::Engine window(config, windowed_model(arch));
  REQUIRE(window.info().kv_window_rings == 2);
  loom::Engine full(window_config("full"), windowed_model(arch));
  const auto got = run(window, {prompts}, 8);
  const auto expected = run(full, {prompts}, 8);
  check_same(got, expected);
  const auto stats = window.stats();
  CHECK(stats.kv_blocks_used == 0);
}

// A cached prompt is reused only up to a block whose ring was checkpointed (at the prompt's last full
// block): the next turn of a conversation resumes there; a prompt sharing only part of the way
// recomputes, since the ring for its cut was not kept.
TEST_CASE("window rings resume a cached prompt from its checkpoint and reproduce a cold prefill", "[engine][window]") {
  const std::string arch = GENERATE(as<std::string>{}, "gemma3", "gpt-oss");
  INFO(arch);
  const auto turn = prompt_of(520, 37);
  auto next_turn = turn;
  const auto more = prompt_of(521, 24);
  next_turn.insert(next_turn.end(), more.begin() + 1, more.end());  // 60 tokens
  auto partial = std::vector<int32_t>(turn.begin(), turn.begin() + 21);
  const auto other = prompt_of(522, 20);
  partial.insert(partial.end(), other.begin() + 1, other.end());
  const std::vector<std::vector<std::vector<int32_t>>> groups = {{turn}, {next_turn, partial, next_turn}};

  auto cold_config = window_config("window");
  cold_config.kv.prefix_caching = false;
  loom::Engine cold_engine(cold_config, windowed_model(arch));
  loom::Engine warm_engine(window_config("window"), windowed_model(arch));
  const auto cold = run(cold_engine, groups, 6);
  const auto warm = run(warm_engine, groups, 6);
  check_same(warm, cold);
  CHECK(warm.outcomes[0].n_cached == 0);
  CHECK(warm.outcomes[1].n_cached == 36);  // the ring checkpointed at the end of `turn`'s 9th block
  CHECK(warm.outcomes[2].n_cached == 0);   // 5 shared blocks, but no ring kept there
  CHECK(warm.outcomes[3].n_cached == 36);
  for (const auto& o : cold.outcomes) CHECK(o.n_cached == 0);
}

TEST_CASE("drafts rejected from a window ring change no token", "[engine][window][speculative]") {
  const std::string arch = GENERATE(as<std::string>{}, "gemma3", "gpt-oss");
  INFO(arch);
  // A passage repeated, so the n-gram drafter proposes.
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 3; ++i) {
    const auto passage = prompt_of(530 + i, 10 + 2 * i);
    std::vector<int32_t> prompt;
    for (int r = 0; r < 3; ++r) prompt.insert(prompt.end(), passage.begin(), passage.end());
    prompts.push_back(prompt);
  }
  auto config = window_config("window");
  config.drafter.kind = "ngram";
  config.drafter.k = 3;
  loom::Engine drafted(config, windowed_model(arch));
  REQUIRE(drafted.drafter() != nullptr);
  loom::Engine full(window_config("full"), windowed_model(arch));
  const auto got = run(drafted, {prompts}, 16);
  const auto expected = run(full, {prompts}, 16);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("request " << i);
    CHECK(got.outcomes[i].tokens == expected.outcomes[i].tokens);
  }
  CHECK(drafted.stats().draft_tokens_proposed > 0);
}

// The rings are core bookkeeping over the backend's STORE_KV and PAGED_ATTENTION: a Vulkan device
// (lavapipe is enough) runs them to the same tokens and logits as its own full cache.
TEST_CASE("vulkan: window rings give the tokens and logits of a full cache", "[engine][window][vulkan]") {
  auto vulkan_config = [](const std::string& sliding_layers) {
    auto config = window_config(sliding_layers);
    config.backend.name = "vulkan";
    return config;
  };
  std::unique_ptr<loom::Engine> full, window;
  try {
    full = std::make_unique<loom::Engine>(vulkan_config("full"), windowed_model("gemma3"));
  } catch (const std::exception& e) {
    WARN("Vulkan backend not available (" << e.what() << "); skipping");
    return;
  }
  window = std::make_unique<loom::Engine>(vulkan_config("window"), windowed_model("gemma3"));
  REQUIRE(window->info().kv_window_rings > 0);
  const std::vector<std::vector<std::vector<int32_t>>> groups = {{prompt_of(540, 45), prompt_of(541, 30)}};
  check_same(run(*window, groups, 8), run(*full, groups, 8));
}
