// Perplexity: window plans, the NLL arithmetic, agreement with an independent token-by-token
// computation through Session, and a model that is exactly uniform over its vocabulary.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "gguf/block_quantize.h"
#include "gguf/gguf_writer.h"
#include "model/session.h"
#include "quantize/quantize_model.h"
#include "test_quantize_helpers.h"

namespace fs = std::filesystem;

TEST_CASE("perplexity: NLL of uniform logits is log(V) and the summary is exp(mean) with llama.cpp's error", "[perplexity]") {
  const std::vector<float> uniform(1000, 3.25f);
  CHECK(loom::token_nll(uniform, 17) == Approx(std::log(1000.0)).epsilon(1e-12));
  // A peaked distribution: logits (10, 0, 0): NLL of token 0 = log(e^10 + 2) - 10.
  const std::vector<float> peaked = {10.0f, 0.0f, 0.0f};
  CHECK(loom::token_nll(peaked, 0) == Approx(std::log(std::exp(10.0) + 2.0) - 10.0).epsilon(1e-12));
  CHECK_THROWS(loom::token_nll(peaked, 3));

  const std::vector<double> nll = {1.0, 2.0, 3.0, 4.0};
  const auto s = loom::summarize_nll(nll);
  CHECK(s.mean_nll == Approx(2.5));
  CHECK(s.ppl == Approx(std::exp(2.5)));
  // population variance 1.25, / (n - 1) = 3 -> stderr sqrt(1.25 / 3)
  CHECK(s.nll_stderr == Approx(std::sqrt(1.25 / 3.0)));
  CHECK(s.ppl_stderr == Approx(s.ppl * s.nll_stderr));
}

TEST_CASE("perplexity: KL divergence of two logit rows", "[perplexity]") {
  const std::vector<float> a = {2.0f, 1.0f, -1.0f}, shifted = {7.0f, 6.0f, 4.0f};
  CHECK(loom::logits_kl_divergence(a, a) == Approx(0.0).margin(1e-15));
  CHECK(loom::logits_kl_divergence(a, shifted) == Approx(0.0).margin(1e-12));  // softmax ignores a shift
  // Two tokens: P = (0.5, 0.5), Q = softmax(log 3, 0) = (0.75, 0.25): KL = 0.5 ln(2/3) + 0.5 ln 2.
  const std::vector<float> p = {0.0f, 0.0f}, q = {float(std::log(3.0)), 0.0f};
  CHECK(loom::logits_kl_divergence(p, q) == Approx(0.5 * std::log(2.0 / 3.0) + 0.5 * std::log(2.0)).epsilon(1e-6));
  CHECK(loom::logits_kl_divergence(q, p) > 0.0);
  CHECK_THROWS(loom::logits_kl_divergence(p, a));
}

TEST_CASE("perplexity: window plans (llama.cpp halves, HF stride scores each token once)", "[perplexity]") {
  loom::PerplexityOptions o;
  o.n_ctx = 8;
  auto w = loom::plan_perplexity_windows(27, o);
  REQUIRE(w.size() == 3);  // 3 full windows; the last 3 tokens are unused
  CHECK(w[2].begin == 16);
  CHECK(w[2].end == 24);
  CHECK(w[0].first_scored == 4);
  CHECK_THROWS_WITH(loom::plan_perplexity_windows(7, o), Catch::Contains("fewer than one window"));

  for (int64_t stride : {1, 3, 5, 8}) {
    INFO("stride " << stride);
    o.stride = stride;
    const int64_t n = 30;
    w = loom::plan_perplexity_windows(n, o);
    std::multiset<int64_t> scored;  // target positions
    for (const auto& win : w) {
      CHECK(win.end - win.begin <= o.n_ctx);
      for (int64_t j = win.first_scored; j < win.end - win.begin - 1; ++j) scored.insert(win.begin + j + 1);
    }
    for (int64_t t = 1; t < n; ++t) {
      // disjoint windows (stride == ctx) cannot score a window's first token: it has no context
      const bool window_start = stride == o.n_ctx && t % o.n_ctx == 0;
      CHECK(scored.count(t) == (window_start ? 0u : 1u));
    }
    // after the first window, every scored token sees at least ctx - stride tokens of context
    for (const auto& win : w) {
      if (win.begin > 0) CHECK(win.first_scored == std::max<int64_t>(o.n_ctx - stride - 1, 0));
    }
  }
  o.stride = 9;
  CHECK_THROWS(loom::plan_perplexity_windows(30, o));
}

TEST_CASE("perplexity: equals exp(mean NLL) computed independently from Session logits", "[perplexity]") {
  const auto dir = loom::test::scratch_dir("perplexity_session");
  auto spec = loom::test::quant_test_spec();
  spec.dim = 64;
  spec.ff_dim = 128;
  const fs::path path = dir / "m.gguf";
  loom::gguf::write_synthetic_model(spec, path);
  auto backend = loom::test::make_cpu_backend();
  const auto file = loom::gguf::GgufFile::open(path);
  const auto tokenizer = loom::Tokenizer::from_gguf(file);
  auto model = loom::Model::load(file, *backend);
  const auto tokens = tokenizer->encode("The keeper wrote down the wind, the waves and the birds.", true, false);
  REQUIRE(tokens.size() >= 12);

  for (int64_t stride : {0, 5}) {
    INFO("stride " << stride);
    loom::PerplexityOptions o;
    o.n_ctx = 12;
    o.stride = stride;
    o.max_batch = 5;  // several forwards per window, some without scored rows
    o.kv_dtype = LOOM_DTYPE_F32;
    const auto result = loom::compute_perplexity(*model, tokens, o);

    // Independent: feed each window one token at a time through Session and score from its logits.
    std::vector<double> nll;
    for (const auto& win : loom::plan_perplexity_windows(static_cast<int64_t>(tokens.size()), o)) {
      loom::SessionOptions so;
      so.n_ctx = o.n_ctx;
      so.kv_dtype = LOOM_DTYPE_F32;
      loom::Session session(*model, so);
      for (int64_t j = 0; j < win.end - win.begin - 1; ++j) {
        const std::vector<float>& logits = session.decode(tokens[size_t(win.begin + j)]);
        if (j < win.first_scored) continue;
        const int32_t target = tokens[size_t(win.begin + j + 1)];
        double max = -INFINITY, sum = 0.0;
        for (float v : logits) max = std::max(max, double(v));
        for (float v : logits) sum += std::exp(double(v) - max);
        nll.push_back(-(double(logits[size_t(target)]) - max - std::log(sum)));
      }
    }
    REQUIRE(result.nll.size() == nll.size());
    double mean = 0.0;
    for (size_t i = 0; i < nll.size(); ++i) {
      CHECK(result.nll[i] == Approx(nll[i]).epsilon(1e-3));
      mean += nll[i];
    }
    mean /= static_cast<double>(nll.size());
    CHECK(result.summary.ppl == Approx(std::exp(mean)).epsilon(1e-3));
    CHECK(result.summary.n == static_cast<int64_t>(nll.size()));
  }
}

TEST_CASE("perplexity: --kld-base compares two KV types over the same batches", "[perplexity]") {
  const auto dir = loom::test::scratch_dir("perplexity_kld");
  auto spec = loom::test::quant_test_spec();
  spec.dim = 64;
  spec.ff_dim = 128;
  spec.n_heads = 2;  // head_dim 32: one Q4_0 block per row
  spec.n_kv_heads = 2;
  const fs::path path = dir / "m.gguf";
  loom::gguf::write_synthetic_model(spec, path);
  auto backend = loom::test::make_cpu_backend();
  const auto file = loom::gguf::GgufFile::open(path);
  const auto tokenizer = loom::Tokenizer::from_gguf(file);
  auto model = loom::Model::load(file, *backend);
  const auto tokens = tokenizer->encode("The keeper wrote down the wind, the waves and the birds, every day.", true, false);
  loom::PerplexityOptions o;
  o.n_ctx = 12;
  o.max_batch = 5;
  o.kv_dtype = LOOM_DTYPE_F32;
  o.kld_base = LOOM_DTYPE_F32;
  const auto same = loom::compute_perplexity(*model, tokens, o);
  REQUIRE(same.kld);
  CHECK(same.kld->n == same.summary.n);
  CHECK(same.kld->mean_kld == Approx(0.0).margin(1e-9));
  CHECK(same.kld->top1_agreement == 1.0);
  CHECK(same.kld->base.ppl == Approx(same.summary.ppl).epsilon(1e-9));

  o.kv_dtype = LOOM_DTYPE_Q4_0;
  const auto q4 = loom::compute_perplexity(*model, tokens, o);
  REQUIRE(q4.kld);
  CHECK(q4.kld->base.ppl == Approx(same.summary.ppl).epsilon(1e-9));  // the base run is the F32 run
  CHECK(q4.kld->mean_kld > 0.0);
  CHECK(q4.kld->max_kld >= q4.kld->mean_kld);
}

TEST_CASE("perplexity: a model with a zero output matrix is uniform, PPL == n_vocab", "[perplexity]") {
  const auto dir = loom::test::scratch_dir("perplexity_uniform");
  auto spec = loom::test::quant_test_spec();
  spec.dim = 64;
  spec.ff_dim = 128;
  const fs::path src = dir / "src.gguf", uniform = dir / "uniform.gguf";
  loom::gguf::write_synthetic_model(spec, src);
  {
    const auto in = loom::gguf::GgufFile::open(src);
    loom::gguf::GgufWriter writer(in.alignment());
    loom::copy_gguf_metadata(in, writer);
    for (const auto& t : in.tensors()) {
      const auto bytes = in.tensor_data(t);
      std::vector<uint8_t> data(bytes.begin(), bytes.end());
      if (t.name == "output.weight") std::fill(data.begin(), data.end(), uint8_t{0});  // F32 zeros
      writer.add_tensor(t.name, t.type, t.dims, std::move(data));
    }
    writer.write(uniform);
  }
  auto backend = loom::test::make_cpu_backend();
  const auto result = loom::test::model_perplexity(uniform, *backend, 32);
  REQUIRE(result.summary.n > 0);
  CHECK(result.summary.ppl == Approx(double(spec.n_vocab)).epsilon(1e-9));
  CHECK(result.summary.nll_stderr == Approx(0.0).margin(1e-9));
}
