// The vision encoder against llama.cpp's mtmd (tests/golden/vision): the encoder's input pixels must be
// equal, the embedding rows close.
#include <array>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "test_model_helpers.h"
#include "test_vision_golden.h"
#include "vision/vision_encoder.h"

using namespace loom;

namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

// The encoder's input pixels bit for bit, its rows within `relative` of the largest row value; returns
// the measured error for the log.
void check_encoder_against_mtmd(const std::string& golden, int64_t want_rows, double relative) {
  const test::VisionGolden g = test::load_vision_golden(golden);
  auto backend = test::cpu_backend();
  auto encoder = vision::VisionEncoder::load(g.mmproj, *backend);
  const vision::MmprojInfo& info = encoder->info();
  CHECK(info.n_embd_text == 128);

  const std::vector<uint8_t> png = read_bytes(g.image);
  const vision::RgbImage image = vision::decode_image(png);
  // A tiled projector's input is its tiles then the overview, in the order mtmd encodes them.
  std::vector<float> pixels;
  if (info.tiled()) {
    for (const std::vector<float>& tile : vision::preprocess_tiles(image, info.preprocess)) pixels.insert(pixels.end(), tile.begin(), tile.end());
  } else {
    const vision::PreprocessedImage input = vision::preprocess(image, info.preprocess);
    pixels = input.pixels;
    CHECK(info.rows_for(input.width, input.height) == want_rows);
  }
  // mtmd's pixels are captured at the patch convolution, after gemma4v's 2x - 1 (Loom's encoder does it too).
  if (info.projector == vision::ProjectorType::gemma4v)
    for (float& v : pixels) v = v * 2.0f - 1.0f;
  // mtmd's Qwen graphs read the image twice, once per frame of the 3-D patch kernel.
  if (info.projector == vision::ProjectorType::qwen25vl || info.projector == vision::ProjectorType::qwen3vl)
    pixels.insert(pixels.end(), pixels.begin(), pixels.end());
  REQUIRE(pixels.size() == g.json.at("pixels").at("count").get<size_t>());
  // Bit for bit: the same target size and letterbox, Pillow's fixed-point resampler, the same float arithmetic.
  CHECK(test::fnv1a64_hex(pixels.data(), pixels.size() * 4) == g.json.at("pixels").at("fnv1a64").get<std::string>());

  const std::vector<float> rows = encoder->encode(image);
  CHECK(int64_t(rows.size()) == want_rows * info.row_width());
  const std::vector<float> want = g.json.at("rows").get<std::vector<float>>();
  REQUIRE(rows.size() == want.size());
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < rows.size(); i++) {
    max_err = std::max(max_err, double(std::abs(rows[i] - want[i])));
    max_ref = std::max(max_ref, double(std::abs(want[i])));
  }
  INFO(golden << ": max |loom - mtmd| = " << max_err << " of max |mtmd| = " << max_ref);
  CHECK(max_err <= relative * max_ref);
}

TEST_CASE("gemma3 vision encoder: pixels equal mtmd's, rows close", "[vision]") {
  // llama.cpp rounds the pixels and the patch kernel to F16 in its im2col, the activations to F16 before
  // F16 matmuls, and takes GELU from an F16 table; Loom keeps activations in F32. Measured: 5.4e-4 of the
  // largest row value (0.0019 of 3.53). A wrong order of patches or pooled cells is off by the rows' own magnitude.
  check_encoder_against_mtmd("gemma3-synth", 16, 5e-3);
}

TEST_CASE("mlp (LLaVA) vision encoder: pixels equal mtmd's, rows close", "[vision]") {
  // Bicubic letterboxing on LLaVA's mean colour; CLIP with its CLS row placed after the patches, quick
  // GELU, all layers but the last; rows 1..n_patches through the MLP, as clip.cpp takes them.
  // Measured: 9.1e-4 of the largest row value (0.0047 of 5.11). Tanh GELU in place of the quick one is
  // off by 8.4e-3, taking rows 0..n-1 by 1.2.
  check_encoder_against_mtmd("llava-mlp-synth", 64, 2.5e-3);
}

TEST_CASE("pixtral vision encoder: pixels equal mtmd's at the image's own size, rows close", "[vision]") {
  // 150x100 becomes 144x96 (sides multiples of 16, the area between 8 and 1024 merged cells): 18x12
  // patches through 2-D RoPE, RMS norms and a SiLU-gated FFN, merged 2x2 into 9x6 cells, projected, and
  // an [IMG_BREAK] row after each of the first 5 rows of cells. Measured: 1.3e-3 of the largest row value
  // (0.0042 of 3.31); the odd RoPE frequencies left out are off by 1.33, rows and columns swapped by 1.81.
  check_encoder_against_mtmd("pixtral-synth", 59, 2.5e-3);
}

TEST_CASE("idefics3 vision encoder: tiles and overview equal mtmd's pixels, rows close", "[vision]") {
  // 150x100 stretched to 128x86 (Lanczos), then to 2x2 tiles of 64; each tile and the overview through
  // SigLIP, pixel-shuffled 2x2 and projected: 5 parts of 16 rows. Measured: 9.8e-4 of the largest row value
  // (0.0036 of 3.61); the shuffle's block order transposed is off by 3.1.
  check_encoder_against_mtmd("idefics3-synth", 80, 2.5e-3);
}

TEST_CASE("gemma4v vision encoder: pixels equal mtmd's at the image's own size, rows close", "[vision]") {
  // 150x100 becomes 176x112 (sides multiples of 16, at least 70 pooled cells): 22x14 patches with
  // learned column and row positions, q/k/v norms, NEOX 2-D RoPE, sandwich norms, layer scalars and
  // clamped linears, pooled 2x2 into 11x7 rows, standardised, normed and projected. Measured: 9.7e-4 of
  // the largest row value (0.0035 of 3.59); without the v norm 0.72 off, the RoPE halves both by row
  // 3.15, the output clamps left out 2.75, the input clamps 2.33.
  check_encoder_against_mtmd("gemma4v-synth", 77, 2.5e-3);
}

TEST_CASE("qwen25vl vision encoder: pixels equal mtmd's at the image's own size, rows close", "[vision]") {
  // 150x100 becomes 144x96 (sides multiples of 16, 8 to 4096 merged cells): 18x12 patches in 2x2 blocks
  // grouped into two windows of 7x7 cells (7x6 and 2x6), 2-D M-RoPE, window attention in layers 0 and
  // 2, full attention in layer 1, merged into 9x6 rows and put back in grid order. Measured: 2.1e-3 of
  // the largest row value (0.0053 of 2.57; 1.6e-3 with F32 weights, llama.cpp's F16 GELU table and
  // activations being the rest); full attention in every layer is off by 1.65, the column half of the
  // RoPE at the row half's frequencies by 2.23.
  check_encoder_against_mtmd("qwen25vl-synth", 54, 3.5e-3);
}

TEST_CASE("qwen3vl vision encoder: pixels equal mtmd's at the image's own size, rows close", "[vision]") {
  // 150x100 becomes 144x96: 18x12 patches, the 16x16 position table resized to 18x12 (bilinear, corners
  // aligned), 2x2 blocks in grid order, q/k/v from one matrix, 2-D M-RoPE, layer norms, full attention;
  // 9x6 rows of 4 x 128 values: the merger's, then the deepstack mergers' of layers 1, 2 and 3.
  // Measured: 7.9e-4 of the largest row value (0.0024 of 3.08).
  check_encoder_against_mtmd("qwen3vl-synth", 54, 3.5e-3);
}

TEST_CASE("vision encoder refuses what it cannot run, naming it", "[vision]") {
  auto backend = test::cpu_backend();
  const auto dir = test::scratch_dir("vision-errors");
  SECTION("a text model is not an mmproj") {
    const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
    CHECK_THROWS_WITH(vision::VisionEncoder::load(g.text_model, *backend), Catch::Contains("not a vision projector"));
  }
  SECTION("an image too long and thin for a projector of any size, before it is resized") {
    const test::VisionGolden g = test::load_vision_golden("pixtral-synth");
    auto encoder = vision::VisionEncoder::load(g.mmproj, *backend);
    vision::RgbImage thin;
    thin.width = 1;
    thin.height = 20000;  // its width rises to one 16-pixel cell: 2 x 9050 patches, the most is 4096
    thin.pixels.assign(size_t(thin.width) * thin.height * 3, 128);
    CHECK_THROWS_WITH(encoder->encode(thin), Catch::Contains("too long and thin") && Catch::Contains("4096"));
  }
  SECTION("gemma4v: more patches per side than the position table holds") {
    const test::VisionGolden g = test::load_vision_golden("gemma4v-synth");
    auto encoder = vision::VisionEncoder::load(g.mmproj, *backend);
    vision::RgbImage wide;
    wide.width = 3000;
    wide.height = 100;  // 2928x96 at the most pixels: 366 patches across, the table has 96
    wide.pixels.assign(size_t(wide.width) * wide.height * 3, 128);
    CHECK_THROWS_WITH(encoder->encode(wide), Catch::Contains("366x12 patches") && Catch::Contains("96 positions"));
  }
  SECTION("idefics3: tiles per side are bounded") {
    const auto mmproj = dir / "idefics3-huge.gguf";
    const std::string line = test::loom_binary().string() +
                             " gguf synth-mmproj --projector idefics3 --image-size 64 --patch 8 --dim 64 --heads 4 --layers 1 --ff 128"
                             " --text-dim 128 --merge 2 --longest-edge 4096 -o '" + mmproj.string() + "' > /dev/null";
    REQUIRE(std::system(line.c_str()) == 0);
    CHECK_THROWS_WITH(vision::VisionEncoder::load(mmproj, *backend), Catch::Contains("more than 16 tiles"));
  }
}

// The golden prompt as one batch on `backend`: text rows, then the image's rows (the encoder's, given
// as embeddings, one non-causal entry), then text; returns the last row's logits. `non_causal` false
// decodes the image's rows causally instead.
std::vector<float> image_prompt_logits(Backend& backend, const test::VisionGolden& g, bool non_causal = true,
                                       bool mrope_positions = true, bool deepstack = true) {
  auto encoder = vision::VisionEncoder::load(g.mmproj, backend);
  auto model = Model::load(g.text_model, backend);
  REQUIRE(model->supports_non_causal());
  const vision::RgbImage picture = vision::decode_image(read_bytes(g.image));
  const std::vector<float> rows = encoder->encode(picture);
  size_t next_row = 0;  // a tiled image is several image chunks, its rows in order
  ForwardBatch batch;
  // M-RoPE (qwen2vl): rows turn by (t, t + row, t + column) of the merged grid, and the image advances
  // the positions by max(columns, rows), as mtmd places them; the last position is mtmd's n_past.
  const bool mrope = model->info().mrope;
  std::vector<std::array<int32_t, 4>> rope;
  int32_t next_position = 0;
  const vision::MmprojInfo& v = encoder->info();
  const vision::ImageSize size = vision::target_size(v.preprocess, picture.width, picture.height);
  const auto columns = int32_t(size.width / v.patch_size / v.merge), grid_rows = int32_t(size.height / v.patch_size / v.merge);
  for (const auto& chunk : g.json.at("chunks")) {
    ForwardBatch::Seq entry;
    entry.first_row = int32_t(batch.tokens.size());
    const bool image = chunk.contains("image");
    const int32_t n = image ? chunk.at("image").get<int32_t>() : int32_t(chunk.at("text").size());
    for (int32_t i = 0; i < n; i++) {
      const int32_t row = int32_t(batch.tokens.size());
      batch.tokens.push_back(image ? 0 : chunk.at("text")[size_t(i)].get<int32_t>());
      batch.positions.push_back(row);
      batch.slot_mapping.push_back(row);
      if (image) batch.embd_rows.push_back(row);
      const int32_t t = next_position + (image ? 0 : i);
      rope.push_back(image ? std::array<int32_t, 4>{t, t + i / columns, t + i % columns, 0} : std::array<int32_t, 4>{t, t, t, 0});
    }
    next_position += image && mrope ? std::max(columns, grid_rows) : n;
    if (image) {
      const size_t values = size_t(n) * size_t(model->info().embd_row_width());
      REQUIRE(next_row + values <= rows.size());
      batch.embd.insert(batch.embd.end(), rows.begin() + std::ptrdiff_t(next_row), rows.begin() + std::ptrdiff_t(next_row + values));
      next_row += values;
    }
    entry.n_query = n;
    entry.context_len = int32_t(batch.tokens.size());
    entry.non_causal = image && non_causal;
    batch.seqs.push_back(entry);
  }
  REQUIRE((mrope ? next_position : int32_t(batch.tokens.size())) == g.json.at("n_past").get<int32_t>());
  if (mrope && mrope_positions) {
    for (size_t c = 0; c < 4; c++)
      for (const auto& position : rope) batch.rope_positions.push_back(position[c]);
  }
  REQUIRE(batch.embd.size() == batch.embd_rows.size() * size_t(model->info().embd_row_width()));
  if (!deepstack) {  // the deepstack parts of every row zeroed: only the main rows reach the text model
    const size_t width = size_t(model->info().embd_row_width()), dim = size_t(model->info().dim);
    for (size_t r = 0; r < batch.embd_rows.size(); r++) std::fill_n(batch.embd.begin() + std::ptrdiff_t(r * width + dim), width - dim, 0.0f);
  }
  const uint32_t block = 16, n_blocks = 8;
  for (auto& entry : batch.seqs)
    for (uint32_t b = 0; b < n_blocks; b++) entry.block_table.push_back(int32_t(b));
  batch.logit_rows = {int32_t(batch.tokens.size()) - 1};
  KvCache kv = model->create_kv_cache(n_blocks, block, LOOM_DTYPE_F16);
  std::vector<float> logits;
  model->forward(batch, kv, logits);
  return logits;
}

double worst_top_difference(const std::vector<float>& logits, const test::VisionGolden& g) {
  double worst = 0.0;
  for (const auto& [id, want] : g.json.at("top").get<std::vector<std::pair<int32_t, float>>>())
    worst = std::max(worst, double(std::abs(logits[size_t(id)] - want)));
  return worst;
}

// The logits after a prompt holding an image, against mtmd's: the text model takes the encoder's rows
// unscaled at the image's positions, and decodes them non-causally (each sees the whole image), as
// Gemma 3 and Gemma 4 (but E2B and E4B) do.
TEST_CASE("gemma text models after an image prompt match mtmd's logits", "[vision]") {
  for (const char* golden : {"gemma3-synth", "gemma4v-synth"}) {
    DYNAMIC_SECTION(golden) {
      const test::VisionGolden g = test::load_vision_golden(golden);
      auto backend = test::cpu_backend();
      const std::vector<float> logits = image_prompt_logits(*backend, g);
      // F16 weights and KV on both sides; the image rows differ by up to 0.0035 (see above). Measured:
      // 0.0022 (gemma3), 0.0020 (gemma4v); decoding the image causally instead moves the logits by 1.15
      // (gemma3), 0.53 (gemma4v).
      const double worst = worst_top_difference(logits, g);
      INFO("worst top-20 logit difference " << worst);
      CHECK(worst < 0.02);
      CHECK(std::max_element(logits.begin(), logits.end()) - logits.begin() == g.json.at("greedy")[0].get<int64_t>());

      // The same prompt decoded causally throughout is measurably different: the check above sees the mask.
      const std::vector<float> causal = image_prompt_logits(*backend, g, false);
      double moved = 0.0;
      for (size_t i = 0; i < causal.size(); i++) moved = std::max(moved, double(std::abs(causal[i] - logits[i])));
      INFO("causal vs non-causal " << moved);
      CHECK(moved > 0.05);
    }
  }
}

// LLaVA, Pixtral, SmolVLM, Qwen2.5-VL and Qwen3-VL decode an image's rows causally, like text (mtmd's
// non-causal ubatch is Gemma's alone). Measured worst top-20 differences: 0.0017 (mlp), 0.0026
// (pixtral), 0.0023 (idefics3), 0.0025 (qwen25vl, whose qwen2vl text model takes M-RoPE positions;
// plain positions move its logits by 1.12), 0.00075 (qwen3vl: plain positions move them by 0.95,
// zeroed deepstack rows by 1.37).
TEST_CASE("text models after a causal image prompt match mtmd's logits", "[vision]") {
  for (const char* golden : {"llava-mlp-synth", "pixtral-synth", "idefics3-synth", "qwen25vl-synth", "qwen3vl-synth"}) {
    DYNAMIC_SECTION(golden) {
      const test::VisionGolden g = test::load_vision_golden(golden);
      auto backend = test::cpu_backend();
      const std::vector<float> logits = image_prompt_logits(*backend, g, /*non_causal=*/false);
      const double worst = worst_top_difference(logits, g);
      INFO("worst top-20 logit difference " << worst);
      CHECK(worst < 0.02);
      CHECK(std::max_element(logits.begin(), logits.end()) - logits.begin() == g.json.at("greedy")[0].get<int64_t>());
      auto moved_by = [&](const std::vector<float>& other) {
        double moved = 0.0;
        for (size_t i = 0; i < other.size(); i++) moved = std::max(moved, double(std::abs(other[i] - logits[i])));
        return moved;
      };
      if (std::string(golden).starts_with("qwen")) {  // the M-RoPE positions matter: plain ones move the logits
        const double moved = moved_by(image_prompt_logits(*backend, g, false, /*mrope_positions=*/false));
        INFO("plain positions vs M-RoPE " << moved);
        CHECK(moved > 0.05);
      }
      if (std::string(golden) == "qwen3vl-synth") {  // and so do the deepstack rows the layers add
        const double moved = moved_by(image_prompt_logits(*backend, g, false, true, /*deepstack=*/false));
        INFO("without the deepstack rows " << moved);
        CHECK(moved > 0.05);
      }
    }
  }
}

// The portable backend runs the same encoders (ABI 1.9 ops, 1.10's quick GELU and 1.11's CLAMP in its
// shaders) and the image rows, non-causal for Gemma and causal for the others.
TEST_CASE("vulkan: the vision encoders and image prompts match mtmd's", "[vision][vulkan]") {
  std::unique_ptr<Backend> vulkan;
  try {
    vulkan = Backend::create(find_backend_plugin(test::model_test_config(), "vulkan"), "{}");
  } catch (const std::exception& e) {
    WARN("Vulkan backend not available (" << e.what() << "); skipping");
    return;
  }
  for (const char* golden : {"gemma3-synth", "llava-mlp-synth", "pixtral-synth", "idefics3-synth", "gemma4v-synth", "qwen25vl-synth", "qwen3vl-synth"}) {
    const test::VisionGolden g = test::load_vision_golden(golden);
    const bool non_causal = std::string(golden).starts_with("gemma");
    auto cpu = test::cpu_backend();
    const auto image = vision::decode_image(read_bytes(g.image));
    const std::vector<float> on_cpu = vision::VisionEncoder::load(g.mmproj, *cpu)->encode(image);
    const std::vector<float> on_vulkan = vision::VisionEncoder::load(g.mmproj, *vulkan)->encode(image);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < on_cpu.size(); i++) {
      diff = std::max(diff, double(std::abs(on_vulkan[i] - on_cpu[i])));
      scale = std::max(scale, double(std::abs(on_cpu[i])));
    }
    INFO(golden << ": vulkan vs cpu rows: " << diff << " of " << scale);
    CHECK(diff <= 1e-4 * scale);  // the same F32 arithmetic, summed in another order
    const double worst = worst_top_difference(image_prompt_logits(*vulkan, g, non_causal), g);
    INFO(golden << ": worst top-20 logit difference from mtmd on vulkan " << worst);
    CHECK(worst < 0.02);
  }
}
