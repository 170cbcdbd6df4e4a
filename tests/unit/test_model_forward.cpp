// The model's forward pass on synthetic llama / qwen2 / qwen3 / gemma2 / gemma3 models through the CPU backend:
// a mixed batch over a permuted paged layout equals each sequence alone, chunked prefill equals
// one-shot prefill, reference and fast backends agree, and bad input gives clear errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/session.h"
#include "model/weight_repack.h"
#include "test_model_helpers.h"

using loom::ForwardBatch;
using loom::KvCache;
using loom::Model;

namespace {

std::vector<int32_t> random_tokens(uint32_t seed, size_t n, int32_t n_vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return tokens;
}

// Logits of every position of `tokens`, in one forward with blocks 0..n of a fresh cache.
std::vector<float> run_alone(Model& model, const std::vector<int32_t>& tokens, uint32_t block_size, loom_dtype kv_dtype) {
  const auto n = static_cast<int32_t>(tokens.size());
  const uint32_t n_blocks = (static_cast<uint32_t>(n) + block_size - 1) / block_size;
  KvCache kv = model.create_kv_cache(n_blocks, block_size, kv_dtype);
  ForwardBatch b;
  b.tokens = tokens;
  for (int32_t i = 0; i < n; ++i) {
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
    b.logit_rows.push_back(i);
  }
  ForwardBatch::Seq seq;
  seq.first_row = 0;
  seq.n_query = n;
  seq.context_len = n;
  seq.block_table.resize(n_blocks);
  std::iota(seq.block_table.begin(), seq.block_table.end(), 0);
  b.seqs.push_back(seq);
  std::vector<float> logits;
  model.forward(b, kv, logits);
  return logits;
}

float max_abs(const float* a, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i]));
  return m;
}

float max_diff(const float* a, const float* b, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

size_t argmax(const float* a, size_t n) { return static_cast<size_t>(std::max_element(a, a + n) - a); }

}  // namespace

TEST_CASE("model: every supported arch loads and runs a forward with finite logits", "[model]") {
  auto backend = loom::test::cpu_backend();
  for (const std::string arch : {"llama", "qwen2", "qwen2vl", "qwen2moe", "qwen3", "qwen3vl", "qwen3moe", "gpt-oss", "gemma2", "gemma3", "gemma4", "olmo2", "granite", "smollm3", "phi3", "qwen35", "qwen35moe", "qwen3next"}) {
    for (loom_dtype weights : {LOOM_DTYPE_F32, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0, LOOM_DTYPE_F16}) {
      INFO(arch << " weights " << weights);
      const auto spec = loom::test::small_spec(arch, weights);
      auto model = Model::load(loom::test::write_small_model(spec, arch + "-any"), *backend);
      const loom::ModelInfo& info = model->info();
      CHECK(info.n_layers == spec.n_layers);
      CHECK(info.n_vocab == spec.n_vocab);
      CHECK(info.head_dim == (arch == "gemma3" || arch == "gemma4" ? 32 : 16));  // gemma4: its global layers'
      loom::Session session(*model, {.n_ctx = 64, .block_size = 4});
      const std::vector<float> logits = session.prefill(random_tokens(1, 12, info.n_vocab));  // a copy: decode reuses the storage
      REQUIRE(logits.size() == static_cast<size_t>(info.n_vocab));
      CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
      CHECK(max_abs(logits.data(), logits.size()) > 0.0f);
      const std::vector<float> after = session.decode(5);
      CHECK(session.n_past() == 13);
      CHECK(max_diff(after.data(), logits.data(), logits.size()) > 0.0f);  // the new token changed something
    }
  }
}

TEST_CASE("model: hyper-parameters follow llama.cpp per arch", "[model]") {
  auto backend = loom::test::cpu_backend();
  auto gemma = Model::load(loom::test::write_small_model(loom::test::small_spec("gemma3"), "gemma3-info"), *backend);
  const loom::ModelInfo& g = gemma->info();
  CHECK(g.arch == loom::ModelArch::gemma3);
  CHECK(g.rope_mode == LOOM_ROPE_NEOX);
  CHECK(g.ffn_activation == LOOM_ACTIVATION_GELU_TANH);
  CHECK(g.tied_output);
  CHECK(g.qk_norm);
  CHECK(g.post_norms);
  CHECK(g.sliding_window == 8);
  CHECK(g.layer_is_local == std::vector<bool>{true, true, true, true, true, false});
  CHECK(g.rope_freq_base == Approx(1e6f));
  CHECK(g.rope_freq_base_local == Approx(10000.0f));
  CHECK(g.embedding_scale == Approx(8.0f));  // sqrt(64)
  CHECK(g.attention_scale == Approx(1.0f / std::sqrt(32.0f)));

  auto qwen = Model::load(loom::test::write_small_model(loom::test::small_spec("qwen2"), "qwen2-info"), *backend);
  CHECK(qwen->info().qkv_bias);
  CHECK(qwen->info().rope_mode == LOOM_ROPE_NEOX);
  CHECK_FALSE(qwen->info().tied_output);
  auto qwen3 = Model::load(loom::test::write_small_model(loom::test::small_spec("qwen3"), "qwen3-info"), *backend);
  CHECK(qwen3->info().qk_norm);
  CHECK_FALSE(qwen3->info().qkv_bias);
  CHECK(qwen3->info().rope_mode == LOOM_ROPE_NEOX);
  auto gemma2 = Model::load(loom::test::write_small_model(loom::test::small_spec("gemma2"), "gemma2-info"), *backend);
  const loom::ModelInfo& g2 = gemma2->info();
  CHECK(g2.arch == loom::ModelArch::gemma2);
  CHECK(g2.layer_is_local == std::vector<bool>{true, false});  // even layers slide, odd ones see everything
  CHECK(g2.sliding_window == 8);
  CHECK(g2.attn_softcap == 50.0f);
  CHECK(g2.final_softcap == 30.0f);
  CHECK(g2.post_norms);
  CHECK_FALSE(g2.qk_norm);
  CHECK(g2.tied_output);
  CHECK(g2.rope_freq_base_local == g2.rope_freq_base);
  CHECK(g2.embedding_scale == Approx(8.0f));
  auto olmo2 = Model::load(loom::test::write_small_model(loom::test::small_spec("olmo2"), "olmo2-info"), *backend);
  CHECK_FALSE(olmo2->info().pre_norms);
  CHECK(olmo2->info().qk_norm_full);
  CHECK_FALSE(olmo2->info().qk_norm);
  CHECK(olmo2->info().post_norms);
  auto granite = Model::load(loom::test::write_small_model(loom::test::small_spec("granite"), "granite-info"), *backend);
  const loom::ModelInfo& gr = granite->info();
  CHECK(gr.embedding_scale == 12.0f);
  CHECK(gr.attention_scale == 0.015625f);
  CHECK(gr.residual_scale == 0.22f);
  CHECK(gr.logit_scale == Approx(0.125f));
  CHECK(gr.rope_mode == LOOM_ROPE_NORMAL);
  auto smollm3_spec = loom::test::small_spec("smollm3");
  smollm3_spec.n_layers = 8;
  auto smollm3 = Model::load(loom::test::write_small_model(smollm3_spec, "smollm3-info"), *backend);
  CHECK(smollm3->info().layer_uses_rope == std::vector<bool>{true, true, true, false, true, true, true, false});
  auto llama = Model::load(loom::test::write_small_model(loom::test::small_spec("llama"), "llama-info"), *backend);
  CHECK(llama->info().rope_mode == LOOM_ROPE_NORMAL);
  CHECK(llama->info().ffn_activation == LOOM_ACTIVATION_SILU);
  CHECK(llama->info().embedding_scale == 1.0f);
  CHECK(std::none_of(llama->info().layer_is_local.begin(), llama->info().layer_is_local.end(), [](bool b) { return b; }));
}

TEST_CASE("model: a mixed batch over a permuted block layout equals each sequence alone", "[model]") {
  auto backend = loom::test::cpu_backend();
  for (const std::string arch : {"llama", "qwen2", "qwen2vl", "qwen2moe", "qwen3", "qwen3vl", "qwen3moe", "gpt-oss", "gemma2", "gemma3", "gemma4", "olmo2", "granite", "smollm3", "phi3"}) {
    INFO(arch);
    auto model = Model::load(loom::test::write_small_model(loom::test::small_spec(arch, LOOM_DTYPE_Q8_0), arch + "-q8"),
                             *backend);
    const int32_t n_vocab = model->info().n_vocab;
    const uint32_t block_size = 4;
    const std::vector<std::vector<int32_t>> seqs = {random_tokens(10, 14, n_vocab), random_tokens(11, 12, n_vocab),
                                                    random_tokens(12, 22, n_vocab)};
    // Step 1 prefills a first part of each; step 2 mixes a decode token (A, C) with a prefill chunk (B).
    const std::vector<std::pair<int32_t, int32_t>> steps[2] = {{{0, 13}, {0, 7}, {0, 21}}, {{13, 1}, {7, 5}, {21, 1}}};

    std::mt19937 rng(42);
    std::vector<int32_t> blocks(64);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::vector<std::vector<int32_t>> tables(3);
    size_t next = 0;
    for (size_t s = 0; s < 3; ++s) {
      for (size_t i = 0; i < (seqs[s].size() + block_size - 1) / block_size; ++i) tables[s].push_back(blocks[next++]);
    }
    KvCache kv = model->create_kv_cache(64, block_size, LOOM_DTYPE_F16);
    std::vector<std::vector<float>> batched(3);  // per sequence, logits of every position in order
    for (const auto& step : steps) {
      ForwardBatch b;
      for (size_t s = 0; s < 3; ++s) {
        const auto [start, count] = step[s];
        ForwardBatch::Seq seq;
        seq.first_row = static_cast<int32_t>(b.tokens.size());
        seq.n_query = count;
        seq.context_len = start + count;
        seq.block_table = tables[s];
        for (int32_t p = start; p < start + count; ++p) {
          b.logit_rows.push_back(static_cast<int32_t>(b.tokens.size()));
          b.tokens.push_back(seqs[s][static_cast<size_t>(p)]);
          b.positions.push_back(p);
          b.slot_mapping.push_back(tables[s][static_cast<size_t>(p) / block_size] * static_cast<int32_t>(block_size) +
                                   p % static_cast<int32_t>(block_size));
        }
        b.seqs.push_back(seq);
      }
      std::vector<float> logits;
      model->forward(b, kv, logits);
      REQUIRE(logits.size() == b.tokens.size() * static_cast<size_t>(n_vocab));
      for (size_t row = 0, s = 0; s < 3; ++s) {
        const auto count = static_cast<size_t>(step[s].second);
        batched[s].insert(batched[s].end(), logits.begin() + static_cast<ptrdiff_t>(row * n_vocab),
                          logits.begin() + static_cast<ptrdiff_t>((row + count) * n_vocab));
        row += count;
      }
    }
    for (size_t s = 0; s < 3; ++s) {
      INFO("sequence " << s);
      const size_t n_pos = static_cast<size_t>(steps[0][s].second + steps[1][s].second);
      std::vector<int32_t> prefix(seqs[s].begin(), seqs[s].begin() + static_cast<ptrdiff_t>(n_pos));
      const std::vector<float> alone = run_alone(*model, prefix, block_size, LOOM_DTYPE_F16);
      REQUIRE(alone.size() == batched[s].size());
      // Same math row by row (each row's matmuls and attention do not depend on the other rows), so
      // only float summation order could differ. Where a table multiplies batches as float GEMM (AVX2,
      // from 8 rows) that order differs, and the next int8 activation rounding or F16 KV store can turn
      // an ulp into one rounding step: measured 1.7e-3 of the logits' scale (gpt-oss, AVX2 EPYC), 0
      // where batches run as integer panels (AVX-512). A wrong block, mask or row is of the scale itself.
      const float scale = std::max(1.0f, max_abs(alone.data(), alone.size()));
      CHECK(max_diff(alone.data(), batched[s].data(), alone.size()) <= 3e-3f * scale);
    }
  }
}

TEST_CASE("model: chunked prefill equals one-shot prefill", "[model]") {
  auto backend = loom::test::cpu_backend();
  for (const std::string arch : {"llama", "gemma2", "gemma3", "gemma4", "olmo2"}) {
    INFO(arch);
    auto model = Model::load(loom::test::write_small_model(loom::test::small_spec(arch), arch + "-f32"), *backend);
    const auto prompt = random_tokens(5, 23, model->info().n_vocab);
    loom::Session one(*model, {.n_ctx = 64, .block_size = 4, .kv_dtype = LOOM_DTYPE_F32});
    const std::vector<float> whole = one.prefill(prompt);
    loom::Session chunked(*model, {.n_ctx = 64, .block_size = 4, .kv_dtype = LOOM_DTYPE_F32, .max_batch = 13});
    const std::vector<float> parts = chunked.prefill(prompt);  // 13 + 10 tokens
    REQUIRE(parts.size() == whole.size());
    CHECK(max_diff(whole.data(), parts.data(), whole.size()) <= 1e-4f * std::max(1.0f, max_abs(whole.data(), whole.size())));
    // And token by token through decode().
    loom::Session stepwise(*model, {.n_ctx = 64, .block_size = 4, .kv_dtype = LOOM_DTYPE_F32});
    std::vector<float> last;
    for (int32_t t : prompt) last = stepwise.decode(t);
    CHECK(max_diff(whole.data(), last.data(), whole.size()) <= 1e-4f * std::max(1.0f, max_abs(whole.data(), whole.size())));
  }
}

TEST_CASE("model: the CPU reference and fast backends agree on logits", "[model]") {
  auto fast = loom::test::cpu_backend(false);
  auto reference = loom::test::cpu_backend(true);
  for (const std::string arch : {"llama", "qwen2", "qwen2vl", "qwen2moe", "qwen3", "qwen3vl", "qwen3moe", "gpt-oss", "gemma2", "gemma3", "gemma4", "olmo2", "granite", "smollm3", "phi3", "qwen35", "qwen35moe", "qwen3next"}) {
    for (loom_dtype weights : {LOOM_DTYPE_F32, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0}) {
      INFO(arch << " weights " << weights);
      const auto path = loom::test::write_small_model(loom::test::small_spec(arch, weights), arch + "-ref");
      auto model_fast = Model::load(path, *fast);
      auto model_ref = Model::load(path, *reference);
      const auto prompt = random_tokens(9, 20, model_fast->info().n_vocab);
      loom::Session session_fast(*model_fast, {.n_ctx = 32, .kv_dtype = LOOM_DTYPE_F32});
      loom::Session session_ref(*model_ref, {.n_ctx = 32, .kv_dtype = LOOM_DTYPE_F32});
      const std::vector<float> a = session_fast.prefill(prompt);
      const std::vector<float> b = session_ref.prefill(prompt);
      const float scale = max_abs(b.data(), b.size());
      const float diff = max_diff(a.data(), b.data(), a.size());
      // F32/F16 weights: the fast kernels differ from the reference's double accumulation only in
      // float summation order (~1e-6 relative per dot). Quantized weights: the fast path quantizes
      // activations to Q8 (blocks of 32, round-to-nearest, relative error <= 1/254 per element),
      // as llama.cpp does. Every matmul input then carries up to 0.4% error; through 2-6 layers of
      // 7 matmuls on these random (structureless) weights the logits moved by at most 2.3% of
      // max |logit| when measured, so 5% passes with margin, while a real mistake (wrong rope,
      // norm or attention) moves them by the order of the logits themselves.
      const float tolerance = weights == LOOM_DTYPE_F32 ? 1e-4f : 5e-2f;
      INFO("max |diff| " << diff << " of max |logit| " << scale);
      CHECK(diff <= tolerance * scale);
      CHECK(argmax(a.data(), a.size()) == argmax(b.data(), b.size()));
    }
  }
}

TEST_CASE("model: context overflow and bad batches are clear errors", "[model]") {
  auto backend = loom::test::cpu_backend();
  const auto path = loom::test::write_small_model(loom::test::small_spec("llama"), "llama-errors");
  auto model = Model::load(path, *backend, {.n_ctx = 16});
  CHECK(model->n_ctx() == 16);

  loom::Session session(*model, {.n_ctx = 16, .block_size = 4});
  session.prefill(random_tokens(2, 15, 384));
  session.decode(7);  // position 15: the last one
  CHECK_THROWS_WITH(session.decode(7), Catch::Contains("context overflow"));
  CHECK(session.n_past() == 16);  // nothing appended by the failed call

  // Straight through Model::forward: position 16 with n_ctx 16.
  KvCache kv = model->create_kv_cache(8, 4);
  ForwardBatch b;
  b.tokens = {1};
  b.positions = {16};
  b.slot_mapping = {16};
  b.seqs.push_back({0, 1, 17, {0, 1, 2, 3, 4}});
  b.logit_rows = {0};
  std::vector<float> logits;
  CHECK_THROWS_WITH(model->forward(b, kv, logits), Catch::Contains("context overflow") && Catch::Contains("16"));

  ForwardBatch bad;
  bad.tokens = {1, 2};
  bad.positions = {0, 1};
  bad.slot_mapping = {0, 1};
  bad.seqs.push_back({0, 2, 2, {0}});
  bad.logit_rows = {1};
  bad.tokens[1] = 100000;
  CHECK_THROWS_WITH(model->forward(bad, kv, logits), Catch::Contains("outside the vocabulary"));
  bad.tokens[1] = 2;
  bad.seqs[0].block_table = {99};
  CHECK_THROWS_WITH(model->forward(bad, kv, logits), Catch::Contains("block 99"));
  bad.seqs[0].block_table = {0};
  bad.positions[1] = 5;
  CHECK_THROWS_WITH(model->forward(bad, kv, logits), Catch::Contains("position"));
  bad.positions[1] = 1;
  bad.logit_rows = {2};
  CHECK_THROWS_WITH(model->forward(bad, kv, logits), Catch::Contains("logit row 2"));
  bad.logit_rows = {1};
  model->forward(bad, kv, logits);  // and the fixed batch runs
  CHECK(logits.size() == 384);
}

namespace {

// A copy of a GGUF file under another architecture name, with one tensor (if named) replaced by
// zeros of another type: `zero_bytes` bytes of zeros, which every block format decodes to 0.0.
std::vector<uint8_t> retyped_copy(const loom::gguf::GgufFile& source, const std::string& arch,
                                  const std::string& retyped_tensor, loom_dtype new_type, size_t zero_bytes) {
  loom::gguf::GgufWriter w;
  for (const auto& entry : source.metadata()) {
    if (entry.key == "general.architecture") continue;
    std::string key = entry.key;
    if (key.starts_with("llama.")) key = arch + key.substr(5);
    std::vector<uint8_t> encoded;
    if (entry.value.type == loom::gguf::ValueType::array) {
      const auto element_type = static_cast<uint32_t>(entry.value.array_type);
      const uint64_t count = entry.value.array_size;
      encoded.resize(12);
      std::memcpy(encoded.data(), &element_type, 4);
      std::memcpy(encoded.data() + 4, &count, 8);
    }
    encoded.insert(encoded.end(), entry.value.raw.begin(), entry.value.raw.end());
    w.set_raw(key, static_cast<uint32_t>(entry.value.type), std::move(encoded));
  }
  w.set_string("general.architecture", arch);
  for (const auto& t : source.tensors()) {
    const auto data = source.tensor_data(t);
    if (t.name == retyped_tensor) {
      w.add_tensor(t.name, new_type, t.dims, std::vector<uint8_t>(zero_bytes, 0));
    } else {
      w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(data.begin(), data.end()));
    }
  }
  return w.to_bytes();
}

}  // namespace

TEST_CASE("model: unsupported architectures and tensor types are clear errors", "[model]") {
  auto backend = loom::test::cpu_backend();
  // Copy a synthetic model, changing the architecture or one tensor's type.
  loom::gguf::GgufWriter original;
  loom::gguf::build_synthetic_model(loom::test::small_spec("llama"), original);
  const std::vector<uint8_t> bytes = original.to_bytes();
  const auto source = loom::gguf::GgufFile::from_memory(bytes, "synthetic");
  auto rewrite = [&](const std::string& arch, const std::string& retyped_tensor, loom_dtype new_type) {
    // Q8_1 (ggml's activation format): 36 bytes per 32 values; contents do not matter, loading must
    // refuse the type.
    const auto* t = source.find_tensor(retyped_tensor);
    return retyped_copy(source, arch, retyped_tensor, new_type, t ? static_cast<size_t>(t->n_elements / 32 * 36) : 0);
  };

  const auto gpt2 = rewrite("gpt2", "", LOOM_DTYPE_F32);
  CHECK_THROWS_WITH(Model::load(loom::gguf::GgufFile::from_memory(gpt2, "gpt2.gguf"), *backend),
                    Catch::Contains("architecture 'gpt2' is not supported") && Catch::Contains("gemma3"));
  const auto q8_1 = rewrite("llama", "blk.1.ffn_up.weight", LOOM_DTYPE_Q8_1);
  CHECK_THROWS_WITH(Model::load(loom::gguf::GgufFile::from_memory(q8_1, "q8_1.gguf"), *backend),
                    Catch::Contains("blk.1.ffn_up.weight") && Catch::Contains("Q8_1") && Catch::Contains("does not support"));
  // The unchanged copy loads, so the two failures above are about what was changed.
  const auto same = rewrite("llama", "", LOOM_DTYPE_F32);
  CHECK_NOTHROW(Model::load(loom::gguf::GgufFile::from_memory(same, "same.gguf"), *backend));
}

TEST_CASE("model: files with the row-decoded block types load and run on the CPU backend", "[model]") {
  auto backend = loom::test::cpu_backend();
  // dim and ff of 256 so that the 256-value K/IQ4_XS blocks fit a row.
  auto spec = loom::test::small_spec("llama");
  spec.dim = 256;
  spec.ff_dim = 256;
  loom::gguf::GgufWriter original;
  loom::gguf::build_synthetic_model(spec, original);
  const std::vector<uint8_t> bytes = original.to_bytes();
  const auto source = loom::gguf::GgufFile::from_memory(bytes, "synthetic");
  const std::string tensor = "blk.1.ffn_up.weight";  // [256, 256]
  const auto prompt = random_tokens(9, 7, spec.n_vocab);
  auto logits_with = [&](loom_dtype type, size_t block_elems, size_t block_bytes) {
    const auto copy = retyped_copy(source, "llama", tensor, type, 256 * 256 / block_elems * block_bytes);
    auto model = Model::load(loom::gguf::GgufFile::from_memory(copy, "retyped.gguf"), *backend);
    loom::Session session(*model, {.n_ctx = 32, .block_size = 4});
    return session.prefill(prompt);
  };
  // Zero blocks decode to zeros, so every type must give the logits of an F32 zero matrix.
  const std::vector<float> expected = logits_with(LOOM_DTYPE_F32, 1, 4);
  const struct {
    loom_dtype type;
    size_t elems, bytes;
  } types[] = {{LOOM_DTYPE_Q4_1, 32, 20}, {LOOM_DTYPE_Q5_1, 32, 24},  {LOOM_DTYPE_Q2_K, 256, 84},    {LOOM_DTYPE_Q3_K, 256, 110},
               {LOOM_DTYPE_Q5_K, 256, 176}, {LOOM_DTYPE_IQ4_NL, 32, 18}, {LOOM_DTYPE_IQ4_XS, 256, 136}};
  for (const auto& t : types) {
    INFO("type " << t.type);
    const std::vector<float> logits = logits_with(t.type, t.elems, t.bytes);
    REQUIRE(logits.size() == expected.size());
    CHECK(max_diff(logits.data(), expected.data(), expected.size()) <= 1e-4f * std::max(1.0f, max_abs(expected.data(), expected.size())));
  }
}

TEST_CASE("model: the Q5_0 -> Q8_0 repack is exact", "[model]") {
  // Random Q5_0 blocks, decoded by the GGML formula, against the Q8_0 reading of the repack.
  std::mt19937 rng(17);
  const size_t n_blocks = 64;
  std::vector<uint8_t> q5(n_blocks * 22);
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = q5.data() + b * 22;
    const uint16_t d = loom::f32_to_f16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
    std::memcpy(block, &d, 2);
    for (int i = 2; i < 22; ++i) block[i] = static_cast<uint8_t>(rng());
  }
  std::vector<uint8_t> q8;
  loom::repack_q5_0_to_q8_0(q5, q8);
  REQUIRE(q8.size() == n_blocks * sizeof(loom_block_q8_0));
  const std::vector<float> got = loom::dequantize_rows(LOOM_DTYPE_Q8_0, q8, static_cast<int64_t>(n_blocks * 32));
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = q5.data() + b * 22;
    uint16_t d_bits;
    uint32_t qh;
    std::memcpy(&d_bits, block, 2);
    std::memcpy(&qh, block + 2, 4);
    const float d = loom::f16_to_f32(d_bits);
    for (int j = 0; j < 16; ++j) {
      const int lo = ((block[6 + j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
      const int hi = ((block[6 + j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
      REQUIRE(got[b * 32 + static_cast<size_t>(j)] == static_cast<float>(lo) * d);
      REQUIRE(got[b * 32 + static_cast<size_t>(j) + 16] == static_cast<float>(hi) * d);
    }
  }
}

TEST_CASE("model: the CPU backend's kernel tables agree with each other on quantized models", "[model]") {
  // The avx512, avx2 and scalar tables quantize activations identically and sum every block in exact
  // integers; only float accumulation order differs, so they must agree far more tightly than
  // fast vs reference (measured: within 3.4e-7 of max |logit| on these models; 1e-5 leaves room for
  // an int8 rounding flip, while a wrong nibble order, offset or scale moves logits by percent).
  // Prefill runs the tile kernels, decode steps the one-row kernels.
  auto backend_for = [](const std::string& simd) -> std::unique_ptr<loom::Backend> {
    try {
      return loom::Backend::create(loom::find_backend_plugin(loom::test::model_test_config(), "cpu"),
                                   R"({"threads": 2, "simd": ")" + simd + R"("})");
    } catch (const std::exception& e) {
      WARN("kernel table " << simd << " not available here: " << e.what());
      return nullptr;
    }
  };
  auto baseline = backend_for("avx2");
  if (!baseline) return;
  for (const std::string simd : {"avx512", "scalar"}) {
    auto other = backend_for(simd);
    if (!other) continue;
    for (loom_dtype weights : {LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0}) {
      INFO(simd << " vs avx2, weights " << weights);
      const auto path = loom::test::write_small_model(loom::test::small_spec("llama", weights), "llama-tables");
      auto model_a = Model::load(path, *baseline);
      auto model_b = Model::load(path, *other);
      loom::Session session_a(*model_a, {.n_ctx = 40, .kv_dtype = LOOM_DTYPE_F32});
      loom::Session session_b(*model_b, {.n_ctx = 40, .kv_dtype = LOOM_DTYPE_F32});
      const auto prompt = random_tokens(17, 21, model_a->info().n_vocab);
      std::vector<std::vector<float>> a{session_a.prefill(prompt)}, b{session_b.prefill(prompt)};
      for (int32_t token : {5, 77, 130}) a.push_back(session_a.decode(token)), b.push_back(session_b.decode(token));
      for (size_t step = 0; step < a.size(); ++step) {
        const float scale = max_abs(a[step].data(), a[step].size());
        const float diff = max_diff(a[step].data(), b[step].data(), a[step].size());
        INFO("step " << step << ": max |diff| " << diff << " of max |logit| " << scale);
        CHECK(diff <= 1e-5f * scale);
      }
    }
  }
}
