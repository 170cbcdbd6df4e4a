// The vision encoder against llama.cpp's mtmd (tests/golden/vision): the encoder's input pixels must be
// equal, the embedding rows close.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "gguf/gguf_file.h"
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

TEST_CASE("gemma3 vision encoder: pixels equal mtmd's, rows close", "[vision]") {
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  auto backend = test::cpu_backend();
  auto encoder = vision::VisionEncoder::load(g.mmproj, *backend);
  const vision::MmprojInfo& info = encoder->info();
  CHECK(info.n_image_tokens() == 16);
  CHECK(info.n_embd_text == 128);

  const std::vector<uint8_t> png = read_bytes(g.image);
  const vision::RgbImage image = vision::decode_image(png);
  const std::vector<float> pixels = vision::preprocess_image(image, info.preprocess);
  REQUIRE(pixels.size() == g.json.at("pixels").at("count").get<size_t>());
  // Bit for bit: the same letterbox, Pillow's fixed-point bilinear and the same float arithmetic.
  CHECK(test::fnv1a64_hex(pixels.data(), pixels.size() * 4) == g.json.at("pixels").at("fnv1a64").get<std::string>());

  const std::vector<float> rows = encoder->encode_pixels(pixels);
  const std::vector<float> want = g.json.at("rows").get<std::vector<float>>();
  REQUIRE(rows.size() == want.size());
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < rows.size(); i++) {
    max_err = std::max(max_err, double(std::abs(rows[i] - want[i])));
    max_ref = std::max(max_ref, double(std::abs(want[i])));
  }
  INFO("max |loom - mtmd| = " << max_err << " of max |mtmd| = " << max_ref);
  // llama.cpp rounds the pixels and the patch kernel to F16 in its im2col, the activations to F16 before
  // F16 matmuls, and takes GELU from an F16 table; Loom keeps activations in F32. Measured: 5.4e-4 of the
  // largest row value (0.0019 of 3.53). A wrong order of patches or pooled cells is off by the rows' own magnitude.
  CHECK(max_err <= 5e-3 * max_ref);
}

TEST_CASE("vision encoder refuses what it cannot run, naming it", "[vision]") {
  auto backend = test::cpu_backend();
  const auto dir = test::scratch_dir("vision-errors");
  SECTION("a text model is not an mmproj") {
    const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
    CHECK_THROWS_WITH(vision::VisionEncoder::load(g.text_model, *backend), Catch::Contains("not a vision projector"));
  }
}
