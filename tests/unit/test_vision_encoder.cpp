// The vision encoder: preprocessing and embedding rows against llama.cpp's mtmd.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "gguf/gguf_file.h"
#include "test_model_helpers.h"
#include "vision/vision_encoder.h"

using namespace loom;

namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<float> read_floats(const std::filesystem::path& path) {
  const auto bytes = read_bytes(path);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

TEST_CASE("scratch: tiny mtmd mmproj", "[vision][.scratch]") {
  auto backend = test::cpu_backend();
  auto encoder = vision::VisionEncoder::load(std::filesystem::path("/tmp/mtmd_check/tiny-gemma3-mmproj.gguf"), *backend);
  const auto pixels = read_floats("/tmp/mtmd_check/inp_raw_chw.bin");
  const auto rows = encoder->encode_pixels(pixels);
  const auto want = read_floats("/tmp/mtmd_check/emb.bin");
  REQUIRE(rows.size() == want.size());
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < rows.size(); i++) {
    max_err = std::max(max_err, double(std::abs(rows[i] - want[i])));
    max_ref = std::max(max_ref, double(std::abs(want[i])));
  }
  WARN("max err " << max_err << " of " << max_ref);
  CHECK(max_err / max_ref < 2e-3);
}
