// TextEncoder (bert) against llama.cpp's embeddings: tests/golden/embed/*.json, written by
// scripts/make_embedding_golden.py with the vendored llama.cpp (each text alone, mean pooling).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "common/error.h"
#include "embed/decoder_embedder.h"
#include "embed/text_encoder.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "server/embeddings_api.h"
#include "test_model_helpers.h"
#include "test_vision_golden.h"
#include "tokenizer/tokenizer.h"

using namespace loom;

namespace {

struct EmbedGolden {
  nlohmann::json json;
  std::filesystem::path model;
};

EmbedGolden load_embed_golden(const std::string& name) {
  EmbedGolden g;
  std::ifstream in(test::source_dir() / "tests" / "golden" / "embed" / (name + ".json"));
  g.json = nlohmann::json::parse(in);
  g.model = test::scratch_dir("embed-" + name) / "model.gguf";
  std::string line = test::loom_binary().string() + " gguf synth";
  for (const auto& a : g.json.at("model").at("args")) line += " '" + a.get<std::string>() + "'";
  line += " -o '" + g.model.string() + "' > /dev/null";
  REQUIRE(std::system(line.c_str()) == 0);
  REQUIRE(test::file_fnv1a64(g.model) == g.json.at("model").at("fnv1a64").get<std::string>());
  return g;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); i++) dot += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
  return dot / std::sqrt(na * nb);
}

std::vector<std::vector<int32_t>> golden_inputs(const EmbedGolden& g) {
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& input : g.json.at("inputs")) inputs.push_back(input.at("tokens").get<std::vector<int32_t>>());
  return inputs;
}

// Every input's embedding against llama.cpp's; returns the lowest cosine.
double worst_cosine(const std::vector<std::vector<float>>& got, const EmbedGolden& g) {
  double worst = 1.0;
  for (size_t i = 0; i < got.size(); i++) {
    const std::vector<float> want = g.json.at("inputs")[i].at("embedding").get<std::vector<float>>();
    REQUIRE(got[i].size() == want.size());
    worst = std::min(worst, cosine(got[i], want));
  }
  return worst;
}

// The documents' indices, highest score first (ties in index order), as a rerank call orders them.
std::vector<size_t> best_first(const std::vector<float>& scores) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

}  // namespace

TEST_CASE("text encoder: each family's embeddings match llama.cpp's, batched or alone", "[embed]") {
  // F16 weights on both sides; llama.cpp rounds activations to F16 before its matmuls and takes GELU
  // from an F16 table. Measured lowest cosines: 1 - 2.2e-7 (bert; a causal mask instead drops it to
  // 0.71), 1 - 4.1e-7 (nomic-bert: rope and a SiLU-gated FFN; without the rope 0.82), and the families
  // of ABI 1.14's window and ALiBi: 1 - 8.6e-7 (jina-bert-v2; without ALiBi 0.946), 1 - 6.1e-7
  // (modern-bert; without the window 0.919), 1 - 3.1e-7 (gemma-embedding; without the window 0.928,
  // without the dense projections -0.14).
  for (const char* name : {"bert-synth", "nomic-bert-synth", "jina-bert-v2-synth", "modern-bert-synth", "gemma-embedding-synth"}) {
    DYNAMIC_SECTION(name) {
      const EmbedGolden g = load_embed_golden(name);
      const gguf::GgufFile file = gguf::GgufFile::open(g.model);
      REQUIRE(embed::is_text_encoder(file));
      // The tokenizer gives llama.cpp's ids ([CLS] text [SEP]).
      const auto tokenizer = Tokenizer::from_gguf(file);
      for (const auto& input : g.json.at("inputs"))
        CHECK(tokenizer->encode(input.at("text").get<std::string>(), true, false) == input.at("tokens").get<std::vector<int32_t>>());

      auto backend = test::cpu_backend();
      auto encoder = embed::TextEncoder::load(file, *backend, 64);
      CHECK(encoder->info().pooling == embed::Pooling::mean);
      CHECK(encoder->info().output_width() == encoder->info().dim);
      const std::vector<std::vector<int32_t>> inputs = golden_inputs(g);
      // All five texts (4 to 24 tokens) in batches of at most 64 rows: each attends to its own rows only.
      const std::vector<std::vector<float>> batched = encoder->embed(inputs, false);
      REQUIRE(batched.size() == inputs.size());
      const double worst = worst_cosine(batched, g);
      INFO("lowest cosine against llama.cpp: 1 - " << (1.0 - worst));
      CHECK(worst > 0.9999);
      double largest = 0;
      for (size_t i = 0; i < inputs.size(); i++) {
        const std::vector<float> alone = encoder->embed({inputs[i]}, false)[0];
        for (size_t j = 0; j < alone.size(); j++) largest = std::max(largest, double(std::abs(alone[j] - batched[i][j])));
      }
      INFO("largest difference between an input alone and in the batch " << largest);
      CHECK(largest < 1e-4);
      // Normalised, each has length 1.
      for (const std::vector<float>& e : encoder->embed(inputs, true)) {
        double n = 0;
        for (float v : e) n += double(v) * v;
        CHECK(std::abs(std::sqrt(n) - 1.0) < 1e-5);
      }
    }
  }
}

TEST_CASE("text encoder: bad inputs are refused naming the input", "[embed]") {
  const EmbedGolden g = load_embed_golden("bert-synth");
  const gguf::GgufFile file = gguf::GgufFile::open(g.model);
  auto backend = test::cpu_backend();
  auto encoder = embed::TextEncoder::load(file, *backend, 64);
  auto refused = [&](const std::vector<std::vector<int32_t>>& inputs, const std::string& words) {
    try {
      encoder->embed(inputs, true);
      FAIL("accepted");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
  };
  refused({{101, 102}, {}}, "input 1: it holds no tokens");
  refused({std::vector<int32_t>(65, 264)}, "input 0: 65 tokens, more than the 64");
  refused({{101, 800, 102}}, "input 0: token id 800 is outside the vocabulary (0..799)");
  // The model's context (128) bounds inputs even when a batch could hold more.
  auto roomy = embed::TextEncoder::load(file, *backend, 512);
  CHECK_THROWS_WITH(roomy->embed({std::vector<int32_t>(129, 264)}, true), Catch::Contains("more than the 128 this model takes (its context)"));
  // A text encoder is not a generative model: the engine's loader says where it is served.
  CHECK_THROWS_WITH(Model::load(g.model, *backend), Catch::Contains("is an embedding model (a text encoder)"));
  // A decoder model is not a text encoder.
  const auto llama = test::write_small_model(test::small_spec("llama"), "embed-not-encoder");
  const gguf::GgufFile decoder = gguf::GgufFile::open(llama);
  CHECK_FALSE(embed::is_text_encoder(decoder));
  CHECK_THROWS_WITH(embed::read_text_encoder_info(decoder), Catch::Contains("is not a text encoder Loom runs"));
}

// The portable backend runs the same ops (ABI 1.9's LAYER_NORM and ATTENTION with sequences).
TEST_CASE("vulkan: each text encoder family's embeddings match llama.cpp's", "[embed][vulkan]") {
  std::unique_ptr<Backend> vulkan;
  try {
    vulkan = Backend::create(find_backend_plugin(test::model_test_config(), "vulkan"), "{}");
  } catch (const std::exception& e) {
    WARN("Vulkan backend not available (" << e.what() << "); skipping");
    return;
  }
  for (const char* name : {"bert-synth", "nomic-bert-synth", "jina-bert-v2-synth", "modern-bert-synth", "gemma-embedding-synth"}) {
    const EmbedGolden g = load_embed_golden(name);
    const gguf::GgufFile file = gguf::GgufFile::open(g.model);
    auto encoder = embed::TextEncoder::load(file, *vulkan, 64);
    const double worst = worst_cosine(encoder->embed(golden_inputs(g), false), g);
    INFO(name << ": lowest cosine against llama.cpp on vulkan: 1 - " << (1.0 - worst));
    CHECK(worst > 0.9999);
  }
}

// Cross-encoder rerankers: bge-reranker's shape (the [CLS] row through dense + tanh and one logit) and
// gte-reranker-modernbert's (the mean of the rows through dense, GELU, a layer norm and one logit). Each
// (query, document) pair laid out as llama-server's rerank does.
TEST_CASE("text encoder: bert and modern-bert rerankers' scores match llama.cpp's and order the documents alike", "[embed]") {
  for (const char* name : {"bert-reranker-synth", "modern-bert-reranker-synth"}) {
    DYNAMIC_SECTION(name) {
      const EmbedGolden g = load_embed_golden(name);
      const gguf::GgufFile file = gguf::GgufFile::open(g.model);
      auto backend = test::cpu_backend();
      auto encoder = embed::TextEncoder::load(file, *backend, 64);
      REQUIRE(encoder->info().pooling == embed::Pooling::rank);
      REQUIRE(encoder->info().n_cls_out == 1);
      const std::vector<std::vector<float>> scores = encoder->embed(golden_inputs(g), /*normalize=*/true);  // never normalised
      std::vector<float> got, want;
      double largest = 0;
      for (size_t i = 0; i < scores.size(); i++) {
        REQUIRE(scores[i].size() == 1);
        got.push_back(scores[i][0]);
        want.push_back(g.json.at("inputs")[i].at("embedding")[0].get<float>());
        largest = std::max(largest, double(std::abs(got.back() - want.back())));
      }
      // Measured: 4.2e-4 (bert, scores of -0.44 to -1.15) and 8.6e-4 (modern-bert, -0.81 to 0.59; the
      // first row instead of the mean: 1.34, another order), F16 weights; llama.cpp runs the heads as F16
      // matmuls, Loom on the host in double.
      INFO("largest score difference " << largest);
      CHECK(largest < 2e-3);
      CHECK(best_first(got) == best_first(want));
    }
  }
}

// A decoder used as an embedder (Qwen3-Embedding's way): qwen3 blocks, each input a causal sequence,
// the final-normed hidden row of its last token (qwen3.pooling_type 3), as llama.cpp pools it.
TEST_CASE("decoder embedder: last-token embeddings of a qwen3 model match llama.cpp's, batched or alone", "[embed]") {
  const EmbedGolden g = load_embed_golden("qwen3-embed-synth");
  const gguf::GgufFile file = gguf::GgufFile::open(g.model);
  CHECK_FALSE(embed::is_text_encoder(file));
  REQUIRE(embed::decoder_pooling(file) == embed::Pooling::last);
  auto backend = test::cpu_backend();
  embed::DecoderEmbedder embedder(Model::load(file, *backend), "qwen3-embed-synth", embed::Pooling::last, 64);
  const std::vector<std::vector<int32_t>> inputs = golden_inputs(g);
  const std::vector<std::vector<float>> batched = embedder.embed(inputs, false);
  // Measured: a lowest cosine of 1 - 6.9e-7; the mean of the rows instead of the last gives 0.56.
  const double worst = worst_cosine(batched, g);
  INFO("lowest cosine against llama.cpp: 1 - " << (1.0 - worst));
  CHECK(worst > 0.9999);
  double largest = 0;
  for (size_t i = 0; i < inputs.size(); i++) {
    const std::vector<float> alone = embedder.embed({inputs[i]}, false)[0];
    for (size_t j = 0; j < alone.size(); j++) largest = std::max(largest, double(std::abs(alone[j] - batched[i][j])));
  }
  INFO("largest difference between an input alone and in the batch " << largest);
  // Float summation order only, which F16 KV stores can round into a step: measured 2.3e-4 on AVX2
  // (batches as float GEMM), less on AVX-512. Another input's rows leaking in would be of order 1.
  CHECK(largest < 1e-3);
  embed::DecoderEmbedder mean(Model::load(file, *backend), "qwen3-embed-synth", embed::Pooling::mean, 64);
  const double mean_cosine = worst_cosine(mean.embed(inputs, false), g);
  INFO("mean pooling instead: " << mean_cosine);
  CHECK(mean_cosine < 0.99);
  CHECK_THROWS_WITH(embed::DecoderEmbedder(Model::load(file, *backend), "m", embed::Pooling::rank, 64), Catch::Contains("needs the reranker's classification head"));
  CHECK_THROWS_WITH(embed::read_classifier_head(file, 128), Catch::Contains("needs tensor 'cls.output.weight'"));
}

// Qwen3-Reranker: each pair laid out by the model's rerank template (tokenized by llama.cpp, specials
// parsed), run as a causal sequence; its last row through the yes/no head and a softmax, so the score
// is P(yes).
TEST_CASE("decoder embedder: a qwen3 reranker's scores match llama.cpp's and order the documents alike", "[embed]") {
  const EmbedGolden g = load_embed_golden("qwen3-reranker-synth");
  const gguf::GgufFile file = gguf::GgufFile::open(g.model);
  REQUIRE(embed::decoder_pooling(file) == embed::Pooling::rank);
  auto backend = test::cpu_backend();
  auto model = Model::load(file, *backend);
  embed::ClassifierHead head = embed::read_classifier_head(file, model->info().dim);
  REQUIRE(head.n_out == 2);
  embed::DecoderEmbedder reranker(std::move(model), "qwen3-reranker-synth", embed::Pooling::rank, 2048, std::move(head));
  // The same tokens as llama.cpp from the template (the server's layout).
  const auto tokenizer = Tokenizer::from_gguf(file);
  const std::string prompt = file.get_string("tokenizer.chat_template.rerank").value_or("");
  REQUIRE(!prompt.empty());
  for (const auto& input : g.json.at("inputs"))
    CHECK(tokenizer->encode(server::fill_rerank_template(prompt, g.json.at("query").get<std::string>(), input.at("text").get<std::string>()), false, true) ==
          input.at("tokens").get<std::vector<int32_t>>());
  const std::vector<std::vector<float>> scores = reranker.embed(golden_inputs(g), false);
  double largest = 0;
  std::vector<float> got, want;
  for (size_t i = 0; i < scores.size(); i++) {
    REQUIRE(scores[i].size() == 2);
    CHECK(std::abs(scores[i][0] + scores[i][1] - 1.0f) < 1e-6);
    const std::vector<float> ref = g.json.at("inputs")[i].at("embedding").get<std::vector<float>>();
    for (size_t j = 0; j < 2; j++) largest = std::max(largest, double(std::abs(scores[i][j] - ref[j])));
    got.push_back(scores[i][0]);
    want.push_back(ref[0]);
  }
  // Measured: 1.7e-3 on scores of 0.05 to 0.59 (llama.cpp rounds activations to F16 before its
  // matmuls, over 260-280 tokens of template and pair).
  INFO("largest score difference " << largest);
  CHECK(largest < 5e-3);
  CHECK(best_first(got) == best_first(want));
}
