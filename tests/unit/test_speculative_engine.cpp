// Speculative decoding through the engine on small synthetic models: greedy output never changes
// (n-gram drafter, a draft model that agrees, one that does not, a drafter proposing garbage, with
// batching and preemption), and sampled output keeps the target's distribution (chi-square on the
// joint of the first two tokens against the exact probabilities, fixed seeds, significance 0.001).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "engine/drafter_plugin.h"
#include "engine/engine.h"
#include "gguf/synth_model.h"
#include "model/session.h"
#include "plugin/plugin_registry.h"
#include "test_engine_helpers.h"
#include "test_paths.h"

namespace {

std::filesystem::path model_with_seed(uint64_t seed) {
  static std::map<uint64_t, std::filesystem::path> paths;
  auto it = paths.find(seed);
  if (it != paths.end()) return it->second;
  auto dir = loom::test::scratch_dir("speculative-model-" + std::to_string(seed));
  const loom::gguf::SynthSpec spec = loom::test::engine_spec("llama", seed);
  auto file = dir / "llama-tiny.gguf";
  loom::gguf::write_synthetic_model(spec, file);
  paths[seed] = file;
  return file;
}

loom::Config spec_config(const std::string& kind = "none", int64_t k = 4, int64_t kv_bytes = 8ll << 20) {
  loom::Config config = loom::test::engine_config(kv_bytes, 128);
  config.drafter.kind = kind;
  config.drafter.k = k;
  return config;
}

struct Result {
  std::vector<int32_t> tokens;
  loom::FinishReason finish = loom::FinishReason::none;
};

loom::Request make_request(const loom::Engine& engine, std::vector<int32_t> prompt, uint32_t max_tokens, Result* out) {
  loom::Request request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  request.sampling.params = engine.default_sampling();
  request.sampling.params.temperature = 0.0f;
  request.on_event = [out](const loom::RequestEvent& e) {
    out->tokens.insert(out->tokens.end(), e.tokens.begin(), e.tokens.end());
    if (e.finish != loom::FinishReason::none) out->finish = e.finish;
  };
  return request;
}

void run_until_done(loom::Engine& engine) {
  for (int guard = 0; engine.n_unfinished() > 0; ++guard) {
    REQUIRE(guard < 200000);
    engine.step();
  }
}

// A passage repeated: the n-gram drafter finds matches, and a model continuing it may copy.
std::vector<int32_t> repetitive_prompt(uint32_t seed, size_t passage_len, int repeats) {
  std::mt19937 rng(seed);
  std::vector<int32_t> passage;
  for (size_t i = 0; i < passage_len; ++i) passage.push_back(static_cast<int32_t>(3 + rng() % 500));
  std::vector<int32_t> prompt = {1};
  for (int r = 0; r < repeats; ++r) prompt.insert(prompt.end(), passage.begin(), passage.end());
  return prompt;
}

std::vector<Result> generate(loom::Engine& engine, const std::vector<std::vector<int32_t>>& prompts, uint32_t max_tokens) {
  std::vector<Result> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) engine.submit(make_request(engine, prompts[i], max_tokens, &results[i]));
  run_until_done(engine);
  return results;
}

// Proposes random tokens: uniformly (one-hot q), or drawn from a random q of its own that favours
// a few tokens (so that some drafts are accepted and some rejected).
class RandomDrafter : public loom::Drafter {
 public:
  explicit RandomDrafter(bool with_probs, std::vector<int32_t> favoured = {})
      : with_probs_(with_probs), favoured_(std::move(favoured)) {}
  std::string name() const override { return "random"; }
  void propose(std::vector<loom::DraftJob>& jobs, uint32_t n_vocab) override {
    for (auto& job : jobs) {
      job.draft.clear();
      job.probs.clear();
      job.has_probs = with_probs_;
      const uint32_t n = static_cast<uint32_t>(rng_() % (job.max_draft + 1));
      for (uint32_t i = 0; i < n; ++i) {
        if (!with_probs_) {
          job.draft.push_back(static_cast<int32_t>(rng_() % n_vocab));
          continue;
        }
        std::vector<float> q(n_vocab);
        for (auto& x : q) x = float(rng_() % 1000 + 1);
        for (int32_t t : favoured_) q[size_t(t)] *= float(rng_() % 400 + 1);
        float total = 0;
        for (float x : q) total += x;
        for (auto& x : q) x /= total;
        job.probs.insert(job.probs.end(), q.begin(), q.end());
        // Drawn from q itself: verification is exact only for proposals that follow their q.
        std::uniform_real_distribution<float> unit(0.0f, 1.0f);
        float target = unit(rng_), cumulative = 0;
        int32_t token = static_cast<int32_t>(n_vocab - 1);
        for (uint32_t t = 0; t < n_vocab; ++t) {
          cumulative += q[t];
          if (target < cumulative) {
            token = static_cast<int32_t>(t);
            break;
          }
        }
        job.draft.push_back(token);
      }
      ++n_calls;
    }
  }
  void accepted(uint64_t, uint32_t) override {}
  void release(uint64_t) override {}
  uint64_t n_calls = 0;

 private:
  bool with_probs_;
  std::vector<int32_t> favoured_;
  std::mt19937 rng_{3};
};

}  // namespace

TEST_CASE("ngram speculation leaves greedy output unchanged and accepts drafts on repetitive text", "[speculative]") {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 4; ++i) prompts.push_back(repetitive_prompt(10 + i, 12 + 3 * i, 3));
  loom::Engine plain(spec_config(), model_with_seed(7));
  const auto expected = generate(plain, prompts, 24);

  loom::Engine engine(spec_config("ngram", 4), model_with_seed(7));
  REQUIRE(engine.drafter() != nullptr);
  const auto got = generate(engine, prompts, 24);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("request " << i);
    CHECK(got[i].finish == loom::FinishReason::length);
    CHECK(got[i].tokens == expected[i].tokens);
  }
  const auto stats = engine.stats();
  CHECK(stats.draft_tokens_proposed > 0);
  CHECK(stats.draft_tokens_accepted <= stats.draft_tokens_proposed);
  CHECK(stats.generated_tokens == 24 * prompts.size());
  CHECK(stats.kv_blocks_used == 0);
  // Disabling speculation per request gives the same tokens without proposals.
  loom::Engine off(spec_config("ngram", 4), model_with_seed(7));
  Result r;
  auto request = make_request(off, prompts[0], 24, &r);
  request.speculative = false;
  off.submit(std::move(request));
  run_until_done(off);
  CHECK(r.tokens == expected[0].tokens);
  CHECK(off.stats().draft_tokens_proposed == 0);
}

TEST_CASE("a draft model equal to the target is almost always accepted and a different one changes nothing", "[speculative]") {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 3; ++i) prompts.push_back(repetitive_prompt(40 + i, 9 + 5 * i, 2));
  loom::Engine plain(spec_config(), model_with_seed(7));
  const auto expected = generate(plain, prompts, 20);

  auto self_config = spec_config("draft_model", 4);
  self_config.drafter.model = model_with_seed(7).string();
  loom::Engine self_draft(self_config, model_with_seed(7));
  const auto got_self = generate(self_draft, prompts, 20);
  auto other_config = spec_config("draft_model", 4);
  other_config.drafter.model = model_with_seed(8).string();
  loom::Engine other_draft(other_config, model_with_seed(7));
  const auto got_other = generate(other_draft, prompts, 20);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("request " << i);
    CHECK(got_self[i].tokens == expected[i].tokens);
    CHECK(got_other[i].tokens == expected[i].tokens);
  }
  const auto self_stats = self_draft.stats();
  const auto other_stats = other_draft.stats();
  INFO("self acceptance " << self_stats.draft_acceptance_rate() << ", other " << other_stats.draft_acceptance_rate());
  CHECK(self_stats.draft_tokens_proposed > 0);
  CHECK(self_stats.draft_acceptance_rate() > 0.9);
  CHECK(self_stats.tokens_per_verification() > 3.0);
  CHECK(other_stats.draft_tokens_proposed > 0);
  CHECK(other_stats.draft_acceptance_rate() < 0.5);
  CHECK(self_stats.kv_blocks_used == 0);
}

TEST_CASE("a drafter proposing garbage never changes greedy output, with batching and preemption", "[speculative]") {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 6; ++i) prompts.push_back(repetitive_prompt(70 + i, 5 + 4 * i, 2));
  loom::Engine plain(spec_config(), model_with_seed(7));
  std::vector<Result> expected;
  for (const auto& p : prompts) expected.push_back(generate(plain, {p}, 30)[0]);

  for (bool with_probs : {false, true}) {
    INFO((with_probs ? "random q" : "one-hot q"));
    // 64 KiB of f32 KV (512 bytes a token) is 128 tokens: six sequences growing to ~60 tokens
    // cannot all fit, so the youngest are preempted while others are mid-speculation.
    loom::Engine engine(spec_config("none", 4, 64 << 10), model_with_seed(7));
    auto drafter = std::make_unique<RandomDrafter>(with_probs);
    auto* raw = drafter.get();
    engine.set_drafter(std::move(drafter), 6);
    const auto got = generate(engine, prompts, 30);
    for (size_t i = 0; i < prompts.size(); ++i) {
      INFO("request " << i);
      CHECK(got[i].tokens == expected[i].tokens);
    }
    const auto stats = engine.stats();
    CHECK(raw->n_calls > 0);
    CHECK(stats.draft_tokens_proposed > 0);
    CHECK(stats.preemptions > 0);
    CHECK(stats.kv_blocks_used == 0);
  }
}

TEST_CASE("stop conditions apply to each accepted token in order", "[speculative]") {
  // A self-drafting engine accepts whole runs of drafts; max_tokens must still cut exactly.
  auto config = spec_config("draft_model", 8);
  config.drafter.model = model_with_seed(7).string();
  loom::Engine engine(config, model_with_seed(7));
  loom::Engine plain(spec_config(), model_with_seed(7));
  for (uint32_t max_tokens : {1u, 2u, 5u, 9u}) {
    const auto prompt = repetitive_prompt(90, 7, 2);
    const auto got = generate(engine, {prompt}, max_tokens)[0];
    const auto want = generate(plain, {prompt}, max_tokens)[0];
    INFO("max_tokens " << max_tokens);
    CHECK(got.tokens.size() == max_tokens);
    CHECK(got.tokens == want.tokens);
    CHECK(got.finish == loom::FinishReason::length);
  }
}

TEST_CASE("speculative sampling keeps the target's distribution of the first two tokens", "[speculative]") {
  // top_k 8 at temperature 1 leaves 64 possible (first, second) pairs whose exact probabilities come
  // from a plain Session; a drafter with its own q (often wrong) proposes, and the counts of 3,000
  // fixed-seed requests must fit (chi-square, significance 0.001). Plain sampling is held to the same test.
  const auto model_path = model_with_seed(7);
  const std::vector<int32_t> prompt = {1, 17, 203, 45, 99};
  const int32_t top_k = 8;
  auto top_distribution = [&](const std::vector<float>& logits) {
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
    });
    std::map<int32_t, double> dist;
    double total = 0;
    for (int i = 0; i < top_k; ++i) total += std::exp(double(logits[size_t(ids[i])]) - logits[size_t(ids[0])]);
    for (int i = 0; i < top_k; ++i) dist[ids[i]] = std::exp(double(logits[size_t(ids[i])]) - logits[size_t(ids[0])]) / total;
    return dist;
  };
  std::map<std::pair<int32_t, int32_t>, double> exact;
  {
    auto backend = loom::Backend::create(loom::find_backend_plugin(spec_config(), "cpu"), "{\"threads\": 2}");
    auto model = loom::Model::load(model_path, *backend);
    loom::Session session(*model);
    const auto first = top_distribution(session.prefill(prompt));
    for (const auto& [t1, p1] : first) {
      session.truncate(static_cast<int64_t>(prompt.size()));
      const auto second = top_distribution(session.decode(t1));
      for (const auto& [t2, p2] : second) exact[{t1, t2}] = p1 * p2;
    }
  }

  auto run = [&](bool speculative) {
    loom::Engine engine(spec_config(), model_path);
    std::vector<int32_t> favoured;
    for (const auto& [pair, p] : exact) favoured.insert(favoured.end(), {pair.first, pair.second});
    if (speculative) engine.set_drafter(std::make_unique<RandomDrafter>(true, favoured), 2);
    std::map<std::pair<int32_t, int32_t>, uint64_t> counts;
    std::vector<Result> results(3000);
    for (size_t i = 0; i < results.size(); ++i) {
      auto request = make_request(engine, prompt, 3, &results[i]);
      request.sampling.params.temperature = 1.0f;
      request.sampling.params.top_k = top_k;
      request.sampling.params.top_p = 1.0f;
      request.sampling.params.min_p = 0.0f;
      request.sampling.seed = 1000 + i;
      engine.submit(std::move(request));
    }
    run_until_done(engine);
    for (const auto& r : results) {
      REQUIRE(r.tokens.size() == 3);
      ++counts[{r.tokens[0], r.tokens[1]}];
    }
    return std::make_pair(counts, engine.stats());
  };

  for (bool speculative : {false, true}) {
    INFO((speculative ? "speculative" : "plain"));
    const auto [counts, stats] = run(speculative);
    double stat = 0, pooled_e = 0, pooled_o = 0;
    int cells = 0;
    uint64_t unexpected = 0;
    for (const auto& [pair, n] : counts) {
      if (exact.count(pair) == 0) unexpected += n;
    }
    CHECK(unexpected == 0);  // nothing outside the top-8 x top-8 support
    for (const auto& [pair, p] : exact) {
      const double e = p * 3000.0;
      const double o = counts.count(pair) ? double(counts.at(pair)) : 0.0;
      if (e < 5.0) {
        pooled_e += e;
        pooled_o += o;
        continue;
      }
      stat += (o - e) * (o - e) / e;
      ++cells;
    }
    if (pooled_e > 0) {
      stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
      ++cells;
    }
    const double df = cells - 1;
    const double a = 2.0 / (9.0 * df);
    const double critical = df * std::pow(1.0 - a + 3.0902 * std::sqrt(a), 3.0);
    INFO("chi-square " << stat << " with " << df << " degrees of freedom, critical " << critical);
    CHECK(stat < critical);
    if (speculative) {
      CHECK(stats.draft_tokens_proposed > 0);
      CHECK(stats.draft_verifications > 0);
    }
  }
}
