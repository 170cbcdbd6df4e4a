// The engine end to end on a small synthetic model and the in-tree plugins (cpu, paged, samplers):
// continuous batching must not change what any request generates, whatever the batch, the block
// layout, preemption or the prefix cache do.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/grammar_constraint.h"
#include "gguf/synth_model.h"
#include "test_engine_helpers.h"
#include "test_paths.h"

namespace {

using namespace loom::test;

// llama, qwen2moe, qwen3moe, gpt-oss, qwen35, qwen35moe or qwen3next (a mixture of 8 experts, 2 per token, as the FFN;
// qwen2moe adds a shared expert, gpt-oss sinks and sliding windows; qwen35 is a Gated DeltaNet layer
// with a recurrent state per sequence, then an attention layer; qwen35moe adds qwen2moe's experts, and
// qwen3next is qwen35moe with grouped value heads and a fused beta/alpha projection):
// batching must not change what a request gets.
std::filesystem::path synthetic_model(const std::string& arch = "llama") {
  static std::map<std::string, std::filesystem::path> paths;
  auto& path = paths[arch];
  if (path.empty()) {
    auto dir = loom::test::scratch_dir("engine-model-" + arch);
    loom::gguf::SynthSpec spec = engine_spec(arch);
    if (arch != "llama" && arch != "qwen35") spec.expert_ff_dim = 64;
    if (arch == "gpt-oss") spec.sliding_window = 16;  // short enough that the prompts cross it
    path = dir / (arch + "-tiny.gguf");
    loom::gguf::write_synthetic_model(spec, path);
  }
  return path;
}

// The families whose first layer is recurrent (a fixed state per sequence, no KV).
bool is_hybrid(const std::string& arch) { return arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next"; }

// Each prompt alone, one at a time: the reference every batched run must reproduce.
std::vector<Outcome> run_one_by_one(const std::vector<std::vector<int32_t>>& prompts, uint32_t max_tokens,
                                    const std::string& arch = "llama") {
  loom::Engine engine(engine_config(), synthetic_model(arch));
  std::vector<Outcome> outcomes(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine.submit(greedy_request(prompts[i], max_tokens, &outcomes[i], engine));
    run_until_done(engine);
  }
  return outcomes;
}

}  // namespace

TEST_CASE("continuous batching gives every request the tokens it gets alone", "[engine]") {
  const std::string arch = GENERATE(as<std::string>{}, "llama", "qwen2moe", "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "qwen3next");
  INFO(arch);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 32; ++i) prompts.push_back(prompt_of(100 + i, 3 + 2 * i));  // 3..65 tokens
  const auto alone = run_one_by_one(prompts, 12, arch);

  // All 32 at once, with a small token budget so long prompts are prefilled in chunks beside decodes.
  auto config = engine_config(8ll << 20, 48);
  config.scheduler.max_num_seqs = 32;
  loom::Engine engine(config, synthetic_model(arch));
  std::vector<Outcome> batched(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) engine.submit(greedy_request(prompts[i], 12, &batched[i], engine));
  run_until_done(engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("request " << i);
    CHECK(batched[i].finish == loom::FinishReason::length);
    CHECK(batched[i].tokens.size() == 12);
    CHECK(batched[i].tokens == alone[i].tokens);
  }
  auto stats = engine.stats();
  CHECK(stats.requests_finished == prompts.size());
  CHECK(stats.kv_blocks_used == 0);  // nothing leaked
  CHECK(stats.generated_tokens == 12 * prompts.size());
}

TEST_CASE("a long prompt arriving is prefilled in capped chunks while running streams get a token every step", "[engine]") {
  // Three streams decode; a 300-token prompt arrives. With prefill_tokens_while_decoding = 32 each
  // step computes 32 of its tokens beside one token per stream (10 steps to its first token); with no
  // cap the whole prompt runs in one step and the streams wait for it. Outputs never change.
  const auto long_prompt = prompt_of(99, 300);
  const auto alone = run_one_by_one({long_prompt}, 4);
  for (int64_t cap : {32, 0}) {
    INFO("prefill_tokens_while_decoding " << cap);
    auto config = engine_config(8ll << 20, 512);
    config.scheduler.prefill_tokens_while_decoding = cap;
    loom::Engine engine(config, synthetic_model());
    std::vector<Outcome> out(4);
    for (int i = 0; i < 3; ++i) engine.submit(greedy_request(prompt_of(10 + i, 8), 40, &out[size_t(i)], engine));
    for (int guard = 0; out[0].tokens.empty() || out[1].tokens.empty() || out[2].tokens.empty(); ++guard) {
      REQUIRE(guard < 100);
      engine.step();
    }
    engine.submit(greedy_request(long_prompt, 4, &out[3], engine));
    int steps = 0;
    while (out[3].tokens.empty()) {
      const size_t before[3] = {out[0].tokens.size(), out[1].tokens.size(), out[2].tokens.size()};
      engine.step();
      ++steps;
      REQUIRE(steps < 100);
      for (int i = 0; i < 3; ++i) CHECK(out[size_t(i)].tokens.size() == before[i] + 1);  // no stream skipped a step
    }
    CHECK(steps == (cap > 0 ? (300 + cap - 1) / cap : 1));
    run_until_done(engine);
    CHECK(out[3].tokens == alone[0].tokens);
  }
}

TEST_CASE("preemption by recompute when blocks run out loses no request and changes no output", "[engine]") {
  const std::string arch = GENERATE(as<std::string>{}, "llama", "qwen2moe", "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "qwen3next");
  INFO(arch);
  // 2 layers x 2 kv heads x 16 dims x 4 bytes x 2 (K and V) = 512 bytes per token, so 1 MiB holds
  // 8 blocks of 256 tokens. Eight 250-token prompts fit one block each, but generating 20 tokens
  // crosses into a second block: the pool runs out and the youngest sequences are preempted.
  // A hybrid model's first layer keeps no KV, so half the bytes per token.
  auto config = engine_config(is_hybrid(arch) ? 1 << 19 : 1 << 20, 512);
  config.kv.block_size = 256;
  config.scheduler.max_num_seqs = 8;
  loom::Engine engine(config, synthetic_model(arch));
  REQUIRE(engine.info().kv_blocks == 8);
  std::vector<std::vector<int32_t>> long_prompts;
  for (uint32_t i = 0; i < 8; ++i) long_prompts.push_back(prompt_of(300 + i, 250));
  const auto long_alone = run_one_by_one(long_prompts, 20, arch);
  std::vector<Outcome> batched(long_prompts.size());
  for (size_t i = 0; i < long_prompts.size(); ++i) engine.submit(greedy_request(long_prompts[i], 20, &batched[i], engine));
  run_until_done(engine);
  for (size_t i = 0; i < long_prompts.size(); ++i) {
    INFO("request " << i);
    CHECK(batched[i].finish == loom::FinishReason::length);
    CHECK(batched[i].tokens == long_alone[i].tokens);
  }
  auto stats = engine.stats();
  CHECK(stats.preemptions > 0);
  CHECK(stats.requests_finished == long_prompts.size());
  CHECK(stats.kv_blocks_used == 0);
}

TEST_CASE("a repeated prompt reuses cached blocks and reproduces the cold prefill's logits", "[engine]") {
  const std::string arch = GENERATE(as<std::string>{}, "llama", "qwen2moe", "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "qwen3next");
  // Hybrid models resume from the recurrent state checkpointed at the prompt's last full block; with
  // no checkpoints they reuse nothing (the state at a block boundary was not kept, loom/kv.h).
  const bool hybrid = is_hybrid(arch);
  const int64_t checkpoints = hybrid ? GENERATE(16, 0) : 16;
  INFO(arch << ", " << checkpoints << " state checkpoints");
  auto config = engine_config();
  config.kv.state_checkpoints = checkpoints;
  loom::Engine engine(config, synthetic_model(arch));
  const auto prompt = prompt_of(400, 37);
  Outcome first, second;
  std::vector<loom::TokenLogprob> cold, hot;
  auto with_logprobs = [&](Outcome* out, std::vector<loom::TokenLogprob>* logprobs) {
    auto request = greedy_request(prompt, 8, out, engine);
    request.n_logprobs = 8;  // the top-8 log-softmax of the raw logits at every step
    request.want_logprobs = true;
    auto forward = request.on_event;
    request.on_event = [forward, logprobs](const loom::RequestEvent& e) {
      logprobs->insert(logprobs->end(), e.logprobs.begin(), e.logprobs.end());
      forward(e);
    };
    return request;
  };
  engine.submit(with_logprobs(&first, &cold));
  run_until_done(engine);
  engine.submit(with_logprobs(&second, &hot));
  run_until_done(engine);
  const bool reuses = checkpoints > 0;
  CHECK(first.n_cached == 0);
  CHECK(second.n_cached == (reuses ? 36 : 0));  // 9 full blocks of 4; the last token is always recomputed
  CHECK(second.tokens == first.tokens);
  REQUIRE(cold.size() == 8);
  REQUIRE(hot.size() == 8);
  for (size_t step = 0; step < cold.size(); ++step) {
    REQUIRE(cold[step].top.size() == 8);
    for (size_t k = 0; k < 8; ++k) {
      INFO("step " << step << ", alternative " << k);
      CHECK(hot[step].top[k].first == cold[step].top[k].first);
      // Same KV bytes, same kernels: only the batch composition differs, so allow float noise only.
      CHECK(hot[step].top[k].second == Approx(cold[step].top[k].second).margin(1e-4));
    }
  }
  auto stats = engine.stats();
  if (reuses) {
    CHECK(stats.prefix_hits >= 9);
  } else {
    CHECK(stats.prefix_hits == 0);
  }
}

// A hybrid model reuses a cached prefix only up to a block whose recurrent state was checkpointed:
// a conversation's next turn (the earlier prompt plus more) resumes there, a prompt that only shares
// part of the way with it recomputes, and either way each request's logits equal a cold run's.
TEST_CASE("hybrid models resume from the recurrent state kept at a cached prompt's end", "[engine]") {
  const std::string arch = GENERATE(as<std::string>{}, "qwen35", "qwen35moe", "qwen3next");
  INFO(arch);
  const auto turn = prompt_of(410, 37);
  auto next_turn = turn;
  const auto more = prompt_of(411, 24);
  next_turn.insert(next_turn.end(), more.begin() + 1, more.end());  // 60 tokens
  auto partial = std::vector<int32_t>(turn.begin(), turn.begin() + 21);
  const auto other = prompt_of(412, 20);
  partial.insert(partial.end(), other.begin() + 1, other.end());  // shares 5 blocks with `turn`, no checkpoint there
  const std::vector<std::vector<int32_t>> later = {next_turn, partial, next_turn};

  auto run = [&](bool prefix_caching, std::vector<std::vector<loom::TokenLogprob>>* logprobs) {
    auto config = engine_config();
    config.kv.prefix_caching = prefix_caching;
    loom::Engine engine(config, synthetic_model(arch));
    std::vector<Outcome> outcomes(1 + later.size());
    logprobs->assign(outcomes.size(), {});
    auto submit = [&](const std::vector<int32_t>& prompt, size_t i) {
      auto request = greedy_request(prompt, 6, &outcomes[i], engine);
      request.n_logprobs = 4;
      request.want_logprobs = true;
      auto forward = request.on_event;
      request.on_event = [forward, out = &(*logprobs)[i]](const loom::RequestEvent& e) {
        out->insert(out->end(), e.logprobs.begin(), e.logprobs.end());
        forward(e);
      };
      engine.submit(std::move(request));
    };
    submit(turn, 0);
    run_until_done(engine);
    for (size_t i = 0; i < later.size(); ++i) submit(later[i], i + 1);  // together: one batch
    run_until_done(engine);
    return outcomes;
  };
  std::vector<std::vector<loom::TokenLogprob>> cold_logprobs, warm_logprobs;
  const auto cold = run(false, &cold_logprobs);
  const auto warm = run(true, &warm_logprobs);
  CHECK(warm[0].n_cached == 0);
  CHECK(warm[1].n_cached == 36);  // the checkpoint at the end of `turn`'s 9th block
  CHECK(warm[2].n_cached == 0);   // its 5 shared blocks hold no checkpoint
  CHECK(warm[3].n_cached == 36);
  for (size_t i = 0; i < cold.size(); ++i) {
    INFO("request " << i);
    CHECK(cold[i].n_cached == 0);
    CHECK(warm[i].tokens == cold[i].tokens);
    REQUIRE(warm_logprobs[i].size() == cold_logprobs[i].size());
    for (size_t step = 0; step < cold_logprobs[i].size(); ++step) {
      for (size_t k = 0; k < cold_logprobs[i][step].top.size(); ++k) {
        CHECK(warm_logprobs[i][step].top[k].first == cold_logprobs[i][step].top[k].first);
        CHECK(warm_logprobs[i][step].top[k].second == Approx(cold_logprobs[i][step].top[k].second).margin(1e-4));
      }
    }
  }
}

TEST_CASE("requests that can never run are refused with the reason", "[engine]") {
  loom::Engine engine(engine_config(), synthetic_model());
  Outcome ignored;
  auto too_long = greedy_request(prompt_of(1, 600), 4, &ignored, engine);
  REQUIRE_THROWS_WITH(engine.submit(std::move(too_long)), Catch::Contains("the context holds 512"));
  REQUIRE_THROWS_WITH(engine.submit(greedy_request({}, 4, &ignored, engine)), Catch::Contains("empty"));
  REQUIRE_THROWS_WITH(engine.submit(greedy_request({1, 99999}, 4, &ignored, engine)),
                      Catch::Contains("outside the vocabulary"));
  auto bad_sampling = greedy_request(prompt_of(2, 5), 4, &ignored, engine);
  bad_sampling.sampling.params.top_p = 7.0f;
  REQUIRE_THROWS_WITH(engine.submit(std::move(bad_sampling)), Catch::Contains("top_p"));
  CHECK(engine.stats().requests_rejected == 4);
  CHECK(engine.n_unfinished() == 0);
}

TEST_CASE("a pool smaller than the model's context lowers n_ctx so a lone sequence always finishes", "[engine]") {
  // 512 bytes per token (see the preemption test): 64 KiB holds 128 tokens, a quarter of the model's 512.
  loom::Engine engine(engine_config(64 << 10), synthetic_model());
  CHECK(engine.info().n_ctx_requested == 512);
  REQUIRE(engine.info().n_ctx == 128);
  REQUIRE(engine.info().kv_capacity_tokens == 128);
  // Asking for far more than the context: it runs to the context's end and keeps everything it made.
  Outcome lone;
  engine.submit(greedy_request(prompt_of(5, 10), 100000, &lone, engine));
  run_until_done(engine);
  CHECK(lone.finish == loom::FinishReason::length);
  CHECK(lone.error.empty());
  CHECK(lone.tokens.size() == 128 - 10);
  CHECK(engine.stats().kv_blocks_used == 0);
}

TEST_CASE("an explicit n_ctx the KV pool cannot hold once is refused naming both settings", "[engine]") {
  auto config = engine_config(64 << 10);
  config.model.n_ctx = 512;
  REQUIRE_THROWS_WITH(loom::Engine(config, synthetic_model()),
                      Catch::Contains("[model] n_ctx = 512") && Catch::Contains("[kv] memory") &&
                          Catch::Contains("holds 128 tokens"));
  config.model.n_ctx = 128;  // exactly what the pool holds
  loom::Engine fits(config, synthetic_model());
  CHECK(fits.info().n_ctx == 128);
}

TEST_CASE("cancelling a running request frees its blocks and tells the client", "[engine]") {
  loom::Engine engine(engine_config(), synthetic_model());
  Outcome outcome;
  auto id = engine.submit(greedy_request(prompt_of(5, 30), 200, &outcome, engine));
  engine.step();
  engine.step();
  CHECK(engine.stats().kv_blocks_used > 0);
  engine.cancel(id);
  engine.step();
  CHECK(outcome.finish == loom::FinishReason::cancelled);
  CHECK(engine.n_unfinished() == 0);
  CHECK(engine.stats().kv_blocks_used == 0);
  CHECK(engine.stats().requests_cancelled == 1);
}

TEST_CASE("random submits, cancels and finishes leave no KV block behind", "[engine]") {
  auto config = engine_config(1 << 20, 32);  // a small pool, so preemption happens too
  config.kv.block_size = 16;
  loom::Engine engine(config, synthetic_model());
  std::mt19937 rng(2024);
  std::vector<loom::RequestId> live;
  std::vector<std::unique_ptr<Outcome>> outcomes;
  for (int op = 0; op < 400; ++op) {
    const uint32_t choice = rng() % 10;
    if (choice < 4) {
      outcomes.push_back(std::make_unique<Outcome>());
      const size_t length = 2 + rng() % 120;
      live.push_back(engine.submit(greedy_request(prompt_of(rng(), length), 1 + rng() % 40, outcomes.back().get(), engine)));
    } else if (choice < 6 && !live.empty()) {
      const size_t victim = rng() % live.size();
      engine.cancel(live[victim]);  // possibly already finished: must be harmless
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    } else {
      engine.step();
    }
  }
  run_until_done(engine);
  size_t answered = 0;
  for (const auto& o : outcomes) answered += o->finish != loom::FinishReason::none;
  CHECK(answered == outcomes.size());  // nothing lost: every request finished or was cancelled
  auto stats = engine.stats();
  CHECK(stats.requests_finished + stats.requests_cancelled == outcomes.size());
  CHECK(stats.kv_blocks_used == 0);
  CHECK(stats.kv_blocks_free == stats.kv_blocks_total);
}

TEST_CASE("the background loop serves requests submitted from other threads", "[engine]") {
  loom::Engine engine(engine_config(), synthetic_model());
  engine.start();
  std::vector<Outcome> outcomes(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    clients.emplace_back([&, i] { engine.submit(greedy_request(prompt_of(600 + i, 10), 6, &outcomes[i], engine)); });
  }
  for (auto& t : clients) t.join();
  engine.stop(true);  // drain: finish everything already submitted
  for (const auto& o : outcomes) {
    CHECK(o.finish == loom::FinishReason::length);
    CHECK(o.tokens.size() == 6);
  }
}

TEST_CASE("an ABI 1.0 sampler (no allowed_tokens) still obeys structured output: the engine masks for it", "[engine][compat]") {
  if (!loom::structured_output_available()) {
    WARN("built without xgrammar (scripts/setup.sh fetches it); skipping");
    return;
  }
  auto config = engine_config();
  config.plugins.search_path.push_back(LOOM_ABI_1_0_PLUGIN_DIR);
  config.sampler.plugin = "abi10_greedy";
  loom::Engine engine(config, synthetic_model());
  REQUIRE(engine.info().plugins.size() >= 3);
  const auto prompt = prompt_of(42, 12);
  Outcome free_run, constrained;
  engine.submit(greedy_request(prompt, 12, &free_run, engine));
  run_until_done(engine);
  auto request = greedy_request(prompt, 12, &constrained, engine);
  request.ignore_eos = false;
  request.constraint = engine.compile_constraint({loom::GrammarSpec::Kind::regex, "(alpha|beta)-[0-9]{3}", {}});
  engine.submit(std::move(request));
  run_until_done(engine);
  INFO("unconstrained: " << free_run.text << " | constrained: " << constrained.text);
  // The random model's own argmax is nothing like the pattern; with the mask it can only spell it.
  CHECK_FALSE((free_run.text.rfind("alpha-", 0) == 0 || free_run.text.rfind("beta-", 0) == 0));
  REQUIRE(constrained.text.size() >= 8);  // "beta-" and three digits at least
  const bool prefix_ok = constrained.text.rfind("alpha-", 0) == 0 || constrained.text.rfind("beta-", 0) == 0;
  CHECK(prefix_ok);
  const std::string digits = constrained.text.substr(constrained.text.find('-') + 1);
  CHECK(digits.size() == 3);
  CHECK(std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }));
}
