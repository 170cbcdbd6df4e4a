// The Vulkan backend runs the families whose rope needs frequency factors or YaRN (Llama 3.1,
// Gemma 4, Phi-3.5's LongRoPE, Ministral 3, a YaRN Qwen2), the mixtures of experts and the hybrid
// qwen35 to the same logits as the CPU backend's reference kernels (the same arithmetic up to f32 summation
// order). Skipped with a message when the Vulkan plugin was not built or no Vulkan device exists
// (lavapipe, Mesa's CPU Vulkan driver, is enough).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/model.h"
#include "model/session.h"
#include "test_model_helpers.h"

namespace {

std::unique_ptr<loom::Backend> vulkan_backend() {
  try {
    return loom::Backend::create(loom::find_backend_plugin(loom::test::model_test_config(), "vulkan"), "{}");
  } catch (const std::exception& e) {
    WARN("Vulkan backend not available (" << e.what() << "); skipping");
    return nullptr;
  }
}

std::vector<float> prefill(loom::Backend& backend, const std::filesystem::path& path, const std::vector<int32_t>& prompt,
                           int64_t n_ctx) {
  auto model = loom::Model::load(path, backend, loom::ModelOptions{n_ctx});
  loom::Session session(*model, {.n_ctx = n_ctx, .block_size = 16, .kv_dtype = LOOM_DTYPE_F32});
  return session.prefill(prompt);
}

// max |a - b| relative to max |b|.
float relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1e-6f);
}

std::vector<int32_t> prompt_of(int n, int32_t n_vocab) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(1 + (i * 37 + 11) % (n_vocab - 1));
  return tokens;
}

}  // namespace

TEST_CASE("vulkan: rope frequency factors and YaRN families match the CPU reference", "[model][vulkan]") {
  auto vulkan = vulkan_backend();
  if (!vulkan) return;
  auto cpu = loom::test::cpu_backend(true);
  struct Case {
    const char* name;
    loom::gguf::SynthSpec spec;
    int64_t n_ctx;
  };
  std::vector<Case> cases;
  auto base = [](const char* arch) {
    loom::gguf::SynthSpec s = loom::test::small_spec(arch);
    s.n_ctx = 256;
    return s;
  };
  {
    auto s = base("llama");
    s.llama3_rope = true;
    s.head_dim = 32;  // spans the three bands of Llama 3.1's factors at base 500000
    cases.push_back({"llama3-rope", s, 64});
  }
  cases.push_back({"gemma4", base("gemma4"), 64});
  {
    auto s = base("phi3");
    s.longrope_original_ctx = 16;  // a 64-token context uses the long factors
    cases.push_back({"phi3-longrope", s, 64});
  }
  {
    auto s = base("mistral3");
    s.yarn_original_ctx = 8;  // the 40-token prompt crosses it: temperature tuning and YaRN
    cases.push_back({"mistral3-yarn", s, 64});
  }
  {
    auto s = base("qwen2");
    s.yarn_original_ctx = 64;
    cases.push_back({"qwen2-yarn", s, 64});
  }
  for (const Case& c : cases) {
    INFO(c.name);
    const auto path = loom::test::write_small_model(c.spec, std::string("vk-") + c.name);
    const auto prompt = prompt_of(40, c.spec.n_vocab);
    const auto want = prefill(*cpu, path, prompt, c.n_ctx);
    const auto got = prefill(*vulkan, path, prompt, c.n_ctx);
    REQUIRE(got.size() == want.size());
    const float diff = relative_diff(got, want);
    INFO("max |logit difference| / max |logit| = " << diff);
    CHECK(diff <= 1e-4f);  // f32 summation order; a wrong frequency moves logits by their own size
  }
}

TEST_CASE("vulkan: mixture-of-experts models match the CPU reference", "[model][vulkan][moe]") {
  auto vulkan = vulkan_backend();
  if (!vulkan) return;
  auto cpu = loom::test::cpu_backend(true);
  for (const char* arch : {"qwen3moe", "qwen2moe", "qwen35moe", "gpt-oss"}) {
    for (loom_dtype weights : {LOOM_DTYPE_F32, LOOM_DTYPE_Q8_0, LOOM_DTYPE_MXFP4}) {
      if (weights == LOOM_DTYPE_MXFP4 && std::string(arch) != "gpt-oss") continue;
      INFO(arch << " weights " << int(weights));
      // MXFP4: gpt-oss as shipped, MXFP4 experts beside F32 attention (sinks, windows, clamped SwiGLU).
      auto spec = loom::test::small_spec(arch, weights == LOOM_DTYPE_MXFP4 ? LOOM_DTYPE_F32 : weights, 5);
      if (weights == LOOM_DTYPE_MXFP4) spec.expert_type = LOOM_DTYPE_MXFP4;
      spec.n_ctx = 256;
      const auto path = loom::test::write_small_model(spec, std::string("vk-") + arch + std::to_string(int(weights)));
      const auto prompt = prompt_of(40, spec.n_vocab);
      const auto want = prefill(*cpu, path, prompt, 64);
      const auto got = prefill(*vulkan, path, prompt, 64);
      REQUIRE(got.size() == want.size());
      INFO("max |logit difference| / max |logit| = " << relative_diff(got, want));
      // F32 summation order, and for Q8_0 weights the same decoded values (both multiply floats);
      // a wrong expert or weight moves logits by their own size.
      CHECK(relative_diff(got, want) <= 1e-4f);
    }
  }
}

TEST_CASE("vulkan: a hybrid model (qwen35) matches the CPU reference, in one batch and in chunks", "[model][vulkan][hybrid]") {
  auto vulkan = vulkan_backend();
  if (!vulkan) return;
  auto cpu = loom::test::cpu_backend(true);
  // qwen3next: value heads grouped by key head (GATED_DELTA_NET's grouped_heads), beta/alpha fused.
  const std::string arch = GENERATE(as<std::string>{}, "qwen35", "qwen3next");
  INFO(arch);
  auto spec = loom::test::small_spec(arch, LOOM_DTYPE_F32, 5);
  spec.n_layers = 4;  // three Gated DeltaNet layers, then gated attention
  spec.n_ctx = 256;
  const auto path = loom::test::write_small_model(spec, "vk-hybrid-" + arch);
  const auto prompt = prompt_of(40, spec.n_vocab);
  const auto want = prefill(*cpu, path, prompt, 64);
  const auto got = prefill(*vulkan, path, prompt, 64);
  REQUIRE(got.size() == want.size());
  INFO("one batch: max |logit difference| / max |logit| = " << relative_diff(got, want));
  CHECK(relative_diff(got, want) <= 1e-4f);
  // Chunks of 6: the states cross every chunk boundary on the device.
  auto model = loom::Model::load(path, *vulkan, loom::ModelOptions{64});
  loom::Session chunked(*model, {.n_ctx = 64, .block_size = 16, .kv_dtype = LOOM_DTYPE_F32, .max_batch = 6});
  const auto got_chunked = chunked.prefill(prompt);
  INFO("chunks of 6: " << relative_diff(got_chunked, want));
  CHECK(relative_diff(got_chunked, want) <= 1e-4f);
}
