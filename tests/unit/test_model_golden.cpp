// Loom's logits against llama.cpp's, recorded by scripts/make_golden.py into tests/golden/*.json:
// the default model (skipped when not installed) and synthetic llama / qwen2 / gemma3 models, which
// the test regenerates bit for bit from the recorded spec (the file hash must match).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"
#include "model/default_model.h"
#include "model/model.h"
#include "model/session.h"
#include "test_model_helpers.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;

// Tolerances, in logits (the default model's top logits are ~15-25; the synthetic ones ~1-5).
// Both engines quantize activations to Q8_0 / Q8_K blocks before quantized matmuls, store K/V as
// F16 and accumulate in float, so neither is "exact"; what still differs is summation order,
// llama.cpp's F16 lookup table for GELU (inputs rounded to F16, ~5e-4 relative) and its F16
// softmax/attention intermediates. Those perturb every layer's activations by ~1e-3 relative; over
// 18 layers the top logits move by up to ~0.1 (measured: see the report of make_golden.py's
// author, typically 0.01-0.06). 0.25 leaves room for other CPUs' kernels while still catching
// any real mistake (a wrong rope base, scale or norm shifts top logits by whole units and
// reorders the top-20). Synthetic models use F16/Q8_0/Q4_0 weights on 2-6 layers: 0.05.
constexpr double kDefaultTolerance = 0.25;
constexpr double kSynthTolerance = 0.05;

uint64_t fnv1a64(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  char c;
  while (in.get(c)) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

std::vector<std::filesystem::path> golden_files() {
  std::vector<std::filesystem::path> files;
  const auto dir = loom::test::source_dir() / "tests" / "golden";
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The model file a golden entry describes, or nullopt (with a WARN) when it is not available.
std::optional<std::filesystem::path> model_for(const json& golden, const std::string& name) {
  const json& model = golden.at("model");
  if (model.at("kind") == "default") {
    auto path = loom::find_default_model();
    if (!path) WARN(name << ": default model not installed (run scripts/setup.sh); skipping");
    return path;
  }
  const json& s = model.at("spec");
  loom::gguf::SynthSpec spec;
  spec.arch = s.at("arch");
  spec.n_layers = s.at("layers");
  spec.dim = s.at("dim");
  spec.n_heads = s.at("heads");
  spec.n_kv_heads = s.at("kv_heads");
  spec.head_dim = s.at("head_dim");
  spec.ff_dim = s.at("ff");
  spec.n_vocab = s.at("vocab");
  spec.n_ctx = s.at("ctx");
  spec.seed = s.at("seed");
  spec.weight_type = *loom::dtype_from_name(s.at("type").get<std::string>());
  const auto path = loom::test::write_small_model(spec, "golden-" + name);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(fnv1a64(path)));
  // The synth writer must be deterministic, or this is not the model llama.cpp saw.
  REQUIRE(std::string(hash) == model.at("fnv1a64").get<std::string>());
  return path;
}

std::vector<int32_t> greedy_continuation(loom::Session& session, std::vector<float> logits, size_t n) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    const auto token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(token);
    if (i + 1 < n) logits = session.decode(token);
  }
  return out;
}

}  // namespace

TEST_CASE("model: logits match llama.cpp's golden files", "[model][golden]") {
  const auto files = golden_files();
  if (files.empty()) {
    WARN("no tests/golden/*.json (run scripts/make_golden.py); skipping");
    return;
  }
  auto backend = loom::test::cpu_backend();
  for (const auto& file : files) {
    const std::string name = file.stem().string();
    INFO("golden " << name);
    std::ifstream in(file);
    const json golden = json::parse(in);
    const auto path = model_for(golden, name);
    if (!path) continue;
    const bool is_default = golden.at("model").at("kind") == "default";
    const double tolerance = is_default ? kDefaultTolerance : kSynthTolerance;
    const auto gguf = loom::gguf::GgufFile::open(*path);
    auto model = loom::Model::load(gguf, *backend);
    REQUIRE(model->info().n_vocab == golden.at("n_vocab").get<int32_t>());
    const auto tokenizer = loom::Tokenizer::from_gguf(gguf);

    for (const json& prompt : golden.at("prompts")) {
      const auto tokens = prompt.at("tokens").get<std::vector<int32_t>>();
      INFO("prompt of " << tokens.size() << " tokens: " << prompt.at("text").get<std::string>().substr(0, 60));
      if (is_default) CHECK(tokenizer->encode(prompt.at("text").get<std::string>(), true, true) == tokens);

      loom::Session session(*model, {.n_ctx = static_cast<int64_t>(tokens.size()) + 32});
      const std::vector<float> logits = session.prefill(tokens);

      // Top-20 of the last position: the same logits within tolerance, the same best token unless
      // llama.cpp's own top two are closer than the tolerance.
      const json& top = prompt.at("top");
      double worst = 0.0;
      for (const json& entry : top) {
        const auto id = entry.at(0).get<size_t>();
        worst = std::max(worst, std::fabs(static_cast<double>(logits.at(id)) - entry.at(1).get<double>()));
      }
      INFO("max |logit - llama.cpp| over its top-20: " << worst);
      CHECK(worst <= tolerance);
      const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      const double golden_gap = top.at(0).at(1).get<double>() - top.at(1).at(1).get<double>();
      if (golden_gap > 2 * tolerance) CHECK(best == top.at(0).at(0).get<int32_t>());

      // Greedy continuation: identical until a step where llama.cpp's margin is within tolerance
      // (a near-tie may flip under a different summation order; after it the texts may diverge).
      const auto expected = prompt.at("greedy").get<std::vector<int32_t>>();
      const auto margins = prompt.at("greedy_margin").get<std::vector<double>>();
      const auto got = greedy_continuation(session, logits, expected.size());
      size_t compared = 0;
      for (; compared < expected.size(); ++compared) {
        if (margins[compared] <= 2 * tolerance) break;
        INFO("greedy step " << compared);
        REQUIRE(got[compared] == expected[compared]);
      }
      if (is_default) CHECK(compared >= 4);  // the comparison must not be vacuous
    }
  }
}
