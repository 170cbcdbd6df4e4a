#include <cmath>
#include <map>
#include <set>

#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_writer.h"
#include "gguf/synth_model.h"
#include "test_gguf_helpers.h"
#include "test_paths.h"

using loom::gguf::GgufFile;
using loom::gguf::SynthSpec;

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes expected_shapes(const SynthSpec& s) {
  const int64_t q = int64_t{s.n_heads} * s.head_dim, kv = int64_t{s.n_kv_heads} * s.head_dim;
  Shapes shapes{{"token_embd.weight", {s.dim, s.n_vocab}}, {"output_norm.weight", {s.dim}}};
  if (s.arch != "gemma3") shapes["output.weight"] = {s.dim, s.n_vocab};
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    shapes[p + "attn_norm.weight"] = {s.dim};
    shapes[p + "attn_q.weight"] = {s.dim, q};
    shapes[p + "attn_k.weight"] = {s.dim, kv};
    shapes[p + "attn_v.weight"] = {s.dim, kv};
    shapes[p + "attn_output.weight"] = {q, s.dim};
    shapes[p + "ffn_norm.weight"] = {s.dim};
    shapes[p + "ffn_gate.weight"] = {s.dim, s.ff_dim};
    shapes[p + "ffn_up.weight"] = {s.dim, s.ff_dim};
    shapes[p + "ffn_down.weight"] = {s.ff_dim, s.dim};
    if (s.arch == "qwen2") {
      shapes[p + "attn_q.bias"] = {q};
      shapes[p + "attn_k.bias"] = {kv};
      shapes[p + "attn_v.bias"] = {kv};
    }
    if (s.arch == "gemma3") {
      shapes[p + "attn_q_norm.weight"] = {s.head_dim};
      shapes[p + "attn_k_norm.weight"] = {s.head_dim};
      shapes[p + "post_attention_norm.weight"] = {s.dim};
      shapes[p + "post_ffw_norm.weight"] = {s.dim};
    }
  }
  return shapes;
}

}  // namespace

TEST_CASE("gguf synth: each arch loads back with llama.cpp's keys, tensors and shapes", "[gguf]") {
  const auto dir = loom::test::scratch_dir("gguf_synth");
  for (const char* arch : {"llama", "qwen2", "gemma3"}) {
    for (loom_dtype type : {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_BF16, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0}) {
      SynthSpec spec;
      spec.arch = arch;
      spec.n_layers = 2;
      spec.dim = 64;
      spec.n_heads = 4;
      spec.n_kv_heads = 2;
      spec.head_dim = std::string(arch) == "gemma3" ? 32 : 0;
      spec.ff_dim = 96;
      spec.n_vocab = 320;
      spec.weight_type = type;
      const auto path = dir / (std::string(arch) + "-" + loom::dtype_name(type) + ".gguf");
      loom::gguf::write_synthetic_model(spec, path);
      const GgufFile file = GgufFile::open(path);
      const SynthSpec resolved = loom::gguf::resolve_synth_spec(spec);
      INFO(path);
      const std::string a = arch;
      CHECK(file.get_string("general.architecture") == a);
      CHECK(file.get_uint(a + ".block_count") == 2u);
      CHECK(file.get_uint(a + ".embedding_length") == 64u);
      CHECK(file.get_uint(a + ".feed_forward_length") == 96u);
      CHECK(file.get_uint(a + ".attention.head_count") == 4u);
      CHECK(file.get_uint(a + ".attention.head_count_kv") == 2u);
      CHECK(file.get_uint(a + ".attention.key_length") == static_cast<uint64_t>(resolved.head_dim));
      CHECK(file.get_uint(a + ".context_length") == 256u);
      CHECK(file.get_float(a + ".attention.layer_norm_rms_epsilon").has_value());
      CHECK(file.get_float(a + ".rope.freq_base").has_value());
      CHECK(file.get_uint(a + ".attention.sliding_window").has_value() == (a == "gemma3"));
      CHECK(file.get_string("tokenizer.ggml.model") == "llama");
      CHECK(file.get_string_array("tokenizer.ggml.tokens").size() == 320);
      CHECK(file.get_float_array("tokenizer.ggml.scores").size() == 320);
      CHECK(file.get_int_array("tokenizer.ggml.token_type").size() == 320);

      const Shapes expected = expected_shapes(resolved);
      CHECK(file.tensors().size() == expected.size());
      for (const auto& [name, dims] : expected) {
        const auto* tensor = file.find_tensor(name);
        INFO(name);
        REQUIRE(tensor != nullptr);
        CHECK(tensor->dims == dims);
        const bool is_matrix = dims.size() == 2;
        CHECK(tensor->type == (is_matrix ? type : LOOM_DTYPE_F32));
      }
    }
  }
}

TEST_CASE("gguf synth: weights are seeded, sane and dequantize near the F32 values", "[gguf]") {
  SynthSpec spec;
  spec.n_vocab = 300;
  loom::gguf::GgufWriter a, b, c;
  loom::gguf::build_synthetic_model(spec, a);
  loom::gguf::build_synthetic_model(spec, b);
  spec.seed = 2;
  loom::gguf::build_synthetic_model(spec, c);
  const auto bytes_a = a.to_bytes();
  CHECK(bytes_a == b.to_bytes());
  CHECK(bytes_a != c.to_bytes());

  spec.seed = 1;
  spec.weight_type = LOOM_DTYPE_Q8_0;
  loom::gguf::GgufWriter q;
  loom::gguf::build_synthetic_model(spec, q);
  const auto bytes_q = q.to_bytes();
  const GgufFile f32 = GgufFile::from_memory(bytes_a);
  const GgufFile q8 = GgufFile::from_memory(bytes_q);
  const auto* wf = f32.find_tensor("blk.0.ffn_up.weight");
  const auto* wq = q8.find_tensor("blk.0.ffn_up.weight");
  REQUIRE((wf && wq));
  const auto ref = loom::dequantize_rows(LOOM_DTYPE_F32, f32.tensor_data(*wf), wf->n_elements);
  const auto deq = loom::dequantize_rows(LOOM_DTYPE_Q8_0, q8.tensor_data(*wq), wq->n_elements);
  double sum_sq = 0.0, max_err = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    sum_sq += double{ref[i]} * ref[i];
    max_err = std::max(max_err, std::fabs(double{ref[i]} - deq[i]));
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(ref.size()));
  CHECK(rms == Approx(1.0 / std::sqrt(64.0)).epsilon(0.1));  // normal * 1/sqrt(fan_in)
  CHECK(max_err < 0.01);
}

TEST_CASE("gguf synth: bad specs are clear errors", "[gguf]") {
  SynthSpec spec;
  spec.arch = "gpt5";
  CHECK_THROWS_WITH(loom::gguf::resolve_synth_spec(spec), Catch::Contains("arch 'gpt5' is not supported"));
  spec = {};
  spec.dim = 48;
  spec.n_heads = 4;
  spec.weight_type = LOOM_DTYPE_Q4_0;
  CHECK_THROWS_WITH(loom::gguf::resolve_synth_spec(spec), Catch::Contains("dim 48 is not a multiple of the Q4_0"));
  spec = {};
  spec.n_kv_heads = 3;
  CHECK_THROWS_WITH(loom::gguf::resolve_synth_spec(spec), Catch::Contains("n_kv_heads 3 must divide"));
  spec = {};
  spec.weight_type = LOOM_DTYPE_Q4_K;
  CHECK_THROWS_WITH(loom::gguf::resolve_synth_spec(spec), Catch::Contains("Q4_K is not supported"));
  spec = {};
  spec.n_vocab = 100;
  loom::gguf::GgufWriter writer;
  CHECK_THROWS_WITH(loom::gguf::build_synthetic_model(spec, writer), Catch::Contains("n_vocab 100 is too small"));
}

TEST_CASE("gguf synth: the generated vocabulary is a self-consistent SentencePiece vocab", "[gguf]") {
  loom::gguf::GgufWriter writer;
  loom::gguf::add_synthetic_vocab(writer, 1000);
  const auto bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_memory(bytes);
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  const auto types = file.get_int_array("tokenizer.ggml.token_type");
  REQUIRE(tokens.size() == 1000);
  CHECK(tokens[0] == "<unk>");
  CHECK(tokens[1] == "<s>");
  CHECK(tokens[2] == "</s>");
  CHECK(tokens[3] == "<0x00>");
  CHECK(tokens[258] == "<0xFF>");
  CHECK(types[3] == 6);
  CHECK(types[258] == 6);
  CHECK(file.get_uint("tokenizer.ggml.bos_token_id") == 1u);
  CHECK(file.get_uint("tokenizer.ggml.eos_token_id") == 2u);
  std::set<std::string> unique(tokens.begin(), tokens.end());
  CHECK(unique.size() == tokens.size());
  CHECK(unique.count("\xe2\x96\x81the") == 1);
  // Every piece's shorter prefix is also a piece, so bigram merges can build it.
  for (size_t i = 259; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    size_t cut = t.size() - 1;
    while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xc0) == 0x80) --cut;
    if (cut > 0) CHECK(unique.count(t.substr(0, cut)) == 1);
  }
}

TEST_CASE("gguf synth: vocab_from copies a real tokenizer", "[gguf]") {
  const auto testdata = loom::test::shared_testdata();
  if (!testdata || !std::filesystem::exists(*testdata / "vocab" / "ggml-vocab-llama-spm.gguf")) {
    WARN("SKIP: ../shared/testdata/vocab/ggml-vocab-llama-spm.gguf is absent");
    return;
  }
  SynthSpec spec;
  spec.n_layers = 1;
  spec.dim = 32;
  spec.ff_dim = 32;
  spec.vocab_from = *testdata / "vocab" / "ggml-vocab-llama-spm.gguf";
  loom::gguf::GgufWriter writer;
  loom::gguf::build_synthetic_model(spec, writer);
  const auto bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_memory(bytes);
  const GgufFile vocab = GgufFile::open(spec.vocab_from);
  CHECK(file.get_string_array("tokenizer.ggml.tokens") == vocab.get_string_array("tokenizer.ggml.tokens"));
  CHECK(file.get_float_array("tokenizer.ggml.scores") == vocab.get_float_array("tokenizer.ggml.scores"));
  CHECK(file.get_uint("tokenizer.ggml.bos_token_id") == vocab.get_uint("tokenizer.ggml.bos_token_id"));
  CHECK(file.find_tensor("token_embd.weight")->dims == std::vector<int64_t>{32, 32000});
}

TEST_CASE("gguf block quantize: half conversions and reference Q8_0 / Q4_0", "[gguf]") {
  CHECK(loom::f32_to_f16(1.0f) == 0x3c00);
  CHECK(loom::f32_to_f16(-2.0f) == 0xc000);
  CHECK(loom::f32_to_f16(65504.0f) == 0x7bff);
  CHECK(loom::f32_to_f16(65520.0f) == 0x7c00);           // rounds up to inf
  CHECK(loom::f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(loom::f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie to even
  CHECK(loom::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (!is_nan && loom::f32_to_f16(loom::f16_to_f32(static_cast<uint16_t>(h))) != h) FAIL("f16 " << h);
  }
  CHECK(loom::f32_to_bf16(1.0f) == 0x3f80);
  CHECK(loom::bf16_to_f32(0x4049) == 3.140625f);

  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) / 4.0f;  // -4 .. 3.75
  loom_block_q8_0 q8;
  loom::quantize_block_q8_0(x, &q8);
  CHECK(loom::f16_to_f32(q8.d) == Approx(4.0f / 127.0f).epsilon(1e-3));
  CHECK(q8.qs[0] == -127);
  CHECK(q8.qs[16] == 0);
  loom_block_q4_0 q4;
  loom::quantize_block_q4_0(x, &q4);
  CHECK(loom::f16_to_f32(q4.d) == 0.5f);    // max is -4 → d = -4 / -8
  CHECK((q4.qs[0] & 0x0f) == 0);            // -4 / 0.5 + 8 = 0
  CHECK((q4.qs[0] >> 4) == 8);              // x[16] = 0 → 8
  CHECK((q4.qs[15] >> 4) == 15);            // x[31] = 3.75 → 7.5 + 8.5 = 16 → clamped to 15
  const auto bytes = loom::quantize_rows(LOOM_DTYPE_Q4_0, std::span<const float>(x, 32), 32);
  const auto back = loom::dequantize_rows(LOOM_DTYPE_Q4_0, bytes, 32);
  for (int j = 0; j < 32; ++j) CHECK(std::fabs(back[j] - x[j]) <= 0.5f);
  CHECK_THROWS_AS(loom::quantize_rows(LOOM_DTYPE_Q8_0, std::span<const float>(x, 16), 16), loom::Error);
}
