// loom quantize's core: the tensor plan, the conversion through the real quantizer plugin, metadata,
// error report, output-path safety, and the quality of the result measured as perplexity.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>

#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_writer.h"
#include "quantize/quant_plan.h"
#include "quantize/quantize_model.h"
#include "quantize/tensor_codec.h"
#include "test_quantize_helpers.h"

namespace fs = std::filesystem;
using loom::gguf::GgufFile;

namespace {

// The plan the quantize_model header promises for the synthetic llama model.
loom_dtype expected_type(const loom::gguf::TensorInfo& t, loom_dtype target) {
  if (t.dims.size() == 1) return LOOM_DTYPE_F32;
  if (t.name == "token_embd.weight" || t.name == "output.weight") {
    const bool four_bit = target == LOOM_DTYPE_Q4_0 || target == LOOM_DTYPE_Q4_K || target == LOOM_DTYPE_I4_G128;
    return four_bit ? LOOM_DTYPE_Q8_0 : target;
  }
  return target;
}

std::map<std::string, std::vector<uint8_t>> metadata_bytes(const GgufFile& f) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& e : f.metadata()) {
    std::vector<uint8_t> v(e.value.raw.begin(), e.value.raw.end());
    v.push_back(static_cast<uint8_t>(e.value.type));
    out[e.key] = std::move(v);
  }
  return out;
}

}  // namespace

TEST_CASE("quantize: synthetic F32 model to Q8_0/Q4_K/Q6_K/Q4_0 keeps metadata, plans types, stays close in PPL",
          "[quantize]") {
  const auto dir = loom::test::scratch_dir("quantize_synth");
  const fs::path f32_path = dir / "f32.gguf";
  loom::gguf::write_synthetic_model(loom::test::quant_test_spec(), f32_path);
  const auto quantizer = loom::test::make_quantizer();
  auto backend = loom::test::make_cpu_backend();
  const double ppl_f32 = loom::test::model_perplexity(f32_path, *backend, 64).summary.ppl;
  const GgufFile in = GgufFile::open(f32_path);
  const auto in_meta = metadata_bytes(in);

  // Margins from measured values (2 layers, dim 256, 64-token windows over the first 2000 characters
  // of tests/data/perplexity_english.txt; this random model's F32 PPL is ~852, worse than uniform):
  // Q8_0 moved PPL by +0.05%, Q4_K by -0.7% and Q4_0 by +0.7% (both keep the embeddings at Q8_0),
  // Q6_K by +0.8% (its embeddings are Q6_K too). On random weights the sign is noise; the size is
  // what a format's rounding does. Margins are ~4-20x the measured change, and far below what a
  // broken conversion gives (a mis-scaled or transposed matrix moves PPL by tens of percent).
  struct Case { loom_dtype type; double margin; uint32_t file_type; };
  const Case cases[] = {{LOOM_DTYPE_Q8_0, 0.01, 7}, {LOOM_DTYPE_Q6_K, 0.03, 18}, {LOOM_DTYPE_Q4_K, 0.05, 14},
                        {LOOM_DTYPE_Q4_0, 0.05, 2}};
  for (const auto& c : cases) {
    const std::string type = loom::dtype_name(c.type);
    INFO("target " << type);
    loom::QuantizeOptions options;
    options.input = f32_path;
    options.output = dir / ("out-" + type + ".gguf");
    options.target = c.type;
    options.n_threads = 2;
    size_t progress_calls = 0;
    const auto report = loom::quantize_model(options, *quantizer, [&](size_t, size_t, const std::string&) { ++progress_calls; });
    CHECK(progress_calls == in.tensors().size() + 1);

    const GgufFile out = GgufFile::open(options.output);
    REQUIRE(out.tensors().size() == in.tensors().size());
    for (size_t i = 0; i < in.tensors().size(); ++i) {
      const auto& t = out.tensors()[i];
      INFO(t.name);
      CHECK(t.name == in.tensors()[i].name);
      CHECK(t.dims == in.tensors()[i].dims);
      CHECK(t.type == expected_type(in.tensors()[i], c.type));
      CHECK(report.tensors[i].plan.to == t.type);
      if (t.type != LOOM_DTYPE_F32) {
        CHECK(report.tensors[i].rel_rms_error > 0.0);
        CHECK(report.tensors[i].rel_rms_error < (c.type == LOOM_DTYPE_Q8_0 ? 0.01 : 0.12));
        CHECK(report.tensors[i].rel_max_error >= report.tensors[i].rel_rms_error * 0.5);
      }
    }
    // Every input key with identical bytes, except the file type, which says what the file now is.
    const auto out_meta = metadata_bytes(out);
    for (const auto& [key, bytes] : in_meta) {
      INFO(key);
      REQUIRE(out_meta.count(key) == 1);
      if (key != "general.file_type") CHECK(out_meta.at(key) == bytes);
    }
    CHECK(out.get_uint("general.file_type") == c.file_type);
    CHECK(out.get_string("loom.quantize.type") == type);

    const double ppl = loom::test::model_perplexity(options.output, *backend, 64).summary.ppl;
    WARN(type << ": PPL " << ppl << " vs F32 " << ppl_f32 << " (" << 100.0 * (ppl / ppl_f32 - 1.0) << "%), "
              << report.bytes_out << " bytes");
    CHECK(std::fabs(ppl / ppl_f32 - 1.0) < c.margin);
  }
}

TEST_CASE("quantize: refuses to overwrite the input (same path, symlink, hard link) and an existing output",
          "[quantize]") {
  const auto dir = loom::test::scratch_dir("quantize_refuse");
  const fs::path in = dir / "in.gguf";
  auto spec = loom::test::quant_test_spec();
  spec.n_layers = 1;
  loom::gguf::write_synthetic_model(spec, in);
  const auto size_before = fs::file_size(in);
  const auto quantizer = loom::test::make_quantizer();
  loom::QuantizeOptions options;
  options.input = in;
  options.target = LOOM_DTYPE_Q8_0;
  options.force = true;  // even --force never overwrites the input

  options.output = in;
  CHECK_THROWS_WITH(loom::quantize_model(options, *quantizer), Catch::Contains("refusing to overwrite the input"));
  options.output = dir / "." / "in.gguf";
  CHECK_THROWS_WITH(loom::quantize_model(options, *quantizer), Catch::Contains("refusing to overwrite the input"));
  fs::create_symlink(in, dir / "link.gguf");
  options.output = dir / "link.gguf";
  CHECK_THROWS_WITH(loom::quantize_model(options, *quantizer), Catch::Contains("refusing to overwrite the input"));
  fs::create_hard_link(in, dir / "hard.gguf");
  options.output = dir / "hard.gguf";
  CHECK_THROWS_WITH(loom::quantize_model(options, *quantizer), Catch::Contains("refusing to overwrite the input"));
  CHECK(fs::file_size(in) == size_before);
  CHECK_NOTHROW(GgufFile::open(in));

  // An unrelated existing output: refused without --force, replaced with it.
  options.output = dir / "out.gguf";
  { std::ofstream(options.output) << "old"; }
  options.force = false;
  CHECK_THROWS_WITH(loom::quantize_model(options, *quantizer), Catch::Contains("--force"));
  CHECK(fs::file_size(options.output) == 3);
  options.force = true;
  loom::quantize_model(options, *quantizer);
  CHECK(GgufFile::open(options.output).get_uint("general.file_type") == 7u);
  CHECK_FALSE(fs::exists(dir / "out.gguf.loom-tmp"));
}

TEST_CASE("quantize: a mixture of experts keeps its routers and biases, and quantizes its 3-D experts", "[quantize]") {
  const auto quantizer = loom::test::make_quantizer();
  const std::vector<loom::TensorShape> shapes = {
      {"blk.0.ffn_gate_inp.weight", LOOM_DTYPE_F32, {256, 8}},        // the router, as llama.cpp leaves it
      {"blk.0.ffn_gate_exps.weight", LOOM_DTYPE_F32, {256, 512, 8}},  // experts: quantized row by row
      {"blk.0.ffn_gate_exps.bias", LOOM_DTYPE_F32, {512, 8}},         // gpt-oss's expert bias
      {"blk.0.ffn_gate_inp_shexp.weight", LOOM_DTYPE_F32, {256}},     // qwen2moe's 1-D shared gate
  };
  const auto plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_Q4_K, loom::EmbeddingPolicy::automatic);
  CHECK(plans[0].to == LOOM_DTYPE_F32);
  CHECK(plans[0].action == loom::TensorAction::copy);
  CHECK_THAT(plans[0].note, Catch::Contains("router"));
  CHECK(plans[1].to == LOOM_DTYPE_Q4_K);
  CHECK(plans[1].n_rows == 512 * 8);
  CHECK(plans[2].to == LOOM_DTYPE_F32);
  CHECK(plans[3].to == LOOM_DTYPE_F32);
}

TEST_CASE("quantize: plan falls back when the block does not divide the row, and honours --keep-embeddings",
          "[quantize]") {
  const auto quantizer = loom::test::make_quantizer();
  const std::vector<loom::TensorShape> shapes = {
      {"token_embd.weight", LOOM_DTYPE_F32, {640, 1000}},   // Gemma-like row of 640: not a multiple of 256
      {"blk.0.attn_q.weight", LOOM_DTYPE_F32, {640, 1024}},
      {"blk.0.attn_output.weight", LOOM_DTYPE_F32, {1024, 640}},
      {"blk.0.odd.weight", LOOM_DTYPE_F32, {80, 8}},        // 80 is not a multiple of 32 either
      {"blk.0.attn_norm.weight", LOOM_DTYPE_F16, {640}},
      {"blk.0.ids", LOOM_DTYPE_I32, {4, 4}},
  };
  auto plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_Q4_K, loom::EmbeddingPolicy::automatic);
  CHECK(plans[0].to == LOOM_DTYPE_Q8_0);
  CHECK_FALSE(plans[0].is_fallback);
  CHECK(plans[1].to == LOOM_DTYPE_Q5_0);  // llama.cpp's fallback for Q4_K
  CHECK(plans[1].is_fallback);
  CHECK_THAT(plans[1].note, Catch::Contains("not divisible"));
  CHECK(plans[2].to == LOOM_DTYPE_Q4_K);
  CHECK(plans[3].to == LOOM_DTYPE_F16);
  CHECK(plans[4].to == LOOM_DTYPE_F32);
  CHECK(plans[4].action == loom::TensorAction::convert);
  CHECK(plans[5].action == loom::TensorAction::copy);

  plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_I4_G128, loom::EmbeddingPolicy::f16);
  CHECK(plans[0].to == LOOM_DTYPE_F16);
  CHECK(plans[1].to == LOOM_DTYPE_I4_G128);  // 640 = 5 x 128
  plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_Q8_0, loom::EmbeddingPolicy::automatic);
  CHECK(plans[0].to == LOOM_DTYPE_Q8_0);
  CHECK(plans[3].to == LOOM_DTYPE_F16);  // Q8_0's own fallback
  plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_Q4_0, loom::EmbeddingPolicy::same);
  CHECK(plans[0].to == LOOM_DTYPE_Q4_0);

  CHECK(loom::parse_quantize_target("q4_k") == LOOM_DTYPE_Q4_K);
  CHECK(loom::parse_quantize_target("I4_G128") == LOOM_DTYPE_I4_G128);
  CHECK(loom::parse_quantize_target("q5_k") == LOOM_DTYPE_Q5_K);
  CHECK_THROWS_WITH(loom::parse_quantize_target("Q8_1"), Catch::Contains("allowed"));
  // llama.cpp's fallbacks for the other block-256 types.
  plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_Q5_K, loom::EmbeddingPolicy::automatic);
  CHECK(plans[1].to == LOOM_DTYPE_Q5_1);
  plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_IQ4_XS, loom::EmbeddingPolicy::automatic);
  CHECK(plans[1].to == LOOM_DTYPE_IQ4_NL);
  plans = loom::plan_tensors(shapes, *quantizer, LOOM_DTYPE_Q2_K, loom::EmbeddingPolicy::automatic);
  CHECK(plans[1].to == LOOM_DTYPE_Q4_0);
  CHECK_THROWS_WITH(loom::parse_embedding_policy("Q4_0"), Catch::Contains("F16, Q8_0, same"));
}

TEST_CASE("quantize: legacy Q5_0/Q5_1/Q4_1 decoders match hand-built blocks", "[quantize]") {
  // Q5_0: d = 0.5, element j has 5-bit value j (j < 16) or 31 - (j - 16): nibble plus the qh bit.
  uint8_t block[22] = {};
  const uint16_t d = loom::f32_to_f16(0.5f);
  std::memcpy(block, &d, 2);
  uint32_t qh = 0;
  int expected[32];
  for (int j = 0; j < 16; ++j) {
    const int lo = j, hi = 31 - j;  // elements j and j + 16
    expected[j] = lo - 16;
    expected[j + 16] = hi - 16;
    block[6 + j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= uint32_t((lo >> 4) & 1) << j;
    qh |= uint32_t((hi >> 4) & 1) << (j + 16);
  }
  std::memcpy(block + 2, &qh, 4);
  float out[32];
  loom::dequantize_row_q5_0(block, out, 32);
  for (int j = 0; j < 32; ++j) CHECK(out[j] == 0.5f * static_cast<float>(expected[j]));

  // Q5_1 with the same quants unshifted plus a min of -1.
  uint8_t block1[24] = {};
  const uint16_t m = loom::f32_to_f16(-1.0f);
  std::memcpy(block1, &d, 2);
  std::memcpy(block1 + 2, &m, 2);
  std::memcpy(block1 + 4, &qh, 4);
  std::memcpy(block1 + 8, block + 6, 16);
  loom::dequantize_row_q5_1(block1, out, 32);
  for (int j = 0; j < 32; ++j) CHECK(out[j] == 0.5f * static_cast<float>(expected[j] + 16) - 1.0f);

  uint8_t block4[20] = {};
  std::memcpy(block4, &d, 2);
  std::memcpy(block4 + 2, &m, 2);
  for (int j = 0; j < 16; ++j) block4[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  loom::dequantize_row_q4_1(block4, out, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(out[j] == 0.5f * static_cast<float>(j) - 1.0f);
    CHECK(out[j + 16] == 0.5f * static_cast<float>(15 - j) - 1.0f);
  }
}

TEST_CASE("quantize: I4_G128 with a calibration text uses importance on attn/ffn inputs only", "[quantize]") {
  const auto dir = loom::test::scratch_dir("quantize_i4");
  const fs::path in = dir / "in.gguf";
  auto spec = loom::test::quant_test_spec();
  spec.n_layers = 1;
  loom::gguf::write_synthetic_model(spec, in);
  const auto quantizer = loom::test::make_quantizer();
  loom::QuantizeOptions options;
  options.input = in;
  options.output = dir / "i4.gguf";
  options.target = LOOM_DTYPE_I4_G128;
  options.calibration = loom::test::english_text_path();
  const auto report = loom::quantize_model(options, *quantizer);
  CHECK(report.n_calibration_tokens > 100);
  for (const auto& t : report.tensors) {
    INFO(t.plan.name);
    const bool reads_normed_stream = t.plan.name.find("attn_q") != std::string::npos ||
                                     t.plan.name.find("attn_k.") != std::string::npos ||
                                     t.plan.name.find("attn_v") != std::string::npos ||
                                     t.plan.name.find("ffn_gate") != std::string::npos ||
                                     t.plan.name.find("ffn_up") != std::string::npos;
    CHECK(t.used_importance == reads_normed_stream);
    if (t.plan.to == LOOM_DTYPE_I4_G128) CHECK(t.rel_rms_error < 0.15);
  }
  const GgufFile out = GgufFile::open(options.output);
  CHECK(out.find_tensor("blk.0.attn_q.weight")->type == LOOM_DTYPE_I4_G128);
  CHECK(out.find_tensor("token_embd.weight")->type == LOOM_DTYPE_Q8_0);
  CHECK(out.get_uint("general.file_type") == uint32_t{LOOM_DTYPE_I4_G128});
  CHECK(out.get_string("loom.quantize.importance").has_value());

  // --simulate: the same I4_G128 values stored as F32, so the CPU backend (no I4_G128 kernels) can
  // run the model; the stored floats are exactly what the format decodes to.
  options.simulate = true;
  options.output = dir / "i4-sim.gguf";
  loom::quantize_model(options, *quantizer);
  const GgufFile sim = GgufFile::open(options.output);
  const auto* q_real = out.find_tensor("blk.0.attn_q.weight");
  const auto* q_sim = sim.find_tensor("blk.0.attn_q.weight");
  REQUIRE(q_sim->type == LOOM_DTYPE_F32);
  const auto decoded = loom::decode_tensor(*quantizer, LOOM_DTYPE_I4_G128, out.tensor_data(*q_real), q_real->dims[1],
                                           q_real->dims[0], 1);
  const auto sim_bytes = sim.tensor_data(*q_sim);
  REQUIRE(sim_bytes.size() == decoded.size() * sizeof(float));
  CHECK(std::memcmp(sim_bytes.data(), decoded.data(), sim_bytes.size()) == 0);
  CHECK(sim.get_string("loom.quantize.simulated").has_value());
  auto backend = loom::test::make_cpu_backend();
  const double ppl_f32 = loom::test::model_perplexity(in, *backend, 64).summary.ppl;
  const double ppl_i4 = loom::test::model_perplexity(options.output, *backend, 64).summary.ppl;
  WARN("I4_G128 (simulated): PPL " << ppl_i4 << " vs F32 " << ppl_f32);
  // measured +1.3% (1 layer, attn/ffn at I4_G128 with importance, embeddings Q8_0)
  CHECK(std::fabs(ppl_i4 / ppl_f32 - 1.0) < 0.05);

  options.simulate = false;
  options.target = LOOM_DTYPE_Q4_K;  // calibration is only meaningful for the activation-aware format
  options.force = true;
  CHECK_THROWS_WITH(loom::quantize_model(options, *quantizer), Catch::Contains("I4_G128"));
}
