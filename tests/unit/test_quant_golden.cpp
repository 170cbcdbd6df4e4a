// The quantizer plugin writes the bytes ggml's own quantizer writes (tests/data/quant-ggml.json, from
// ggml_quantize_chunk through scripts/make_quant_golden.py): every GGML format it declares, on rows
// with normal values, outliers, only positive values and zero blocks. And what it writes decodes in
// the CPU backend (checked against gguf-py in test_dequant_golden.cpp) to what the plugin itself decodes.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gguf/dtype_traits.h"
#include "test_model_helpers.h"
#include "test_quantize_helpers.h"

namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

nlohmann::json read_golden() {
  std::ifstream in(loom::test::source_dir() / "tests" / "data" / "quant-ggml.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Rows decoded by the CPU backend's GET_ROWS.
std::vector<float> backend_decode(loom::Backend& backend, loom_dtype type, const std::vector<uint8_t>& bytes, int64_t n_rows,
                                  int64_t n_cols) {
  using loom::tensor_view;
  auto weights = backend.alloc(bytes.size(), LOOM_BUFFER_USAGE_WEIGHTS);
  backend.upload(weights, 0, bytes.data(), bytes.size());
  auto scratch = backend.alloc(256 + uint64_t(n_rows * n_cols) * 4, LOOM_BUFFER_USAGE_COMPUTE);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < int32_t(n_rows); ++i) ids.push_back(i);
  backend.upload(scratch, 0, ids.data(), ids.size() * 4);
  const loom_tensor table = tensor_view(weights, 0, type, n_cols, n_rows);
  const loom_tensor dst = tensor_view(scratch, 256, LOOM_DTYPE_F32, n_cols, n_rows);
  const std::vector<loom_op> ops = {loom::make_op(LOOM_OP_GET_ROWS, dst, {table, tensor_view(scratch, 0, LOOM_DTYPE_I32, n_rows)})};
  backend.run(ops);
  std::vector<float> out(size_t(n_rows * n_cols));
  backend.download(out.data(), scratch, 256, out.size() * 4);
  backend.synchronize();
  return out;
}

}  // namespace

TEST_CASE("quantizer: every GGML format writes ggml_quantize_chunk's bytes", "[quantize][golden]") {
  const nlohmann::json golden = read_golden();
  const int64_t n_rows = golden.at("n_rows"), n_cols = golden.at("n_per_row");
  const std::vector<uint8_t> input_bytes = from_hex(golden.at("input_f32_le"));
  REQUIRE(input_bytes.size() == size_t(n_rows * n_cols * 4));
  std::vector<float> x(size_t(n_rows * n_cols));
  std::memcpy(x.data(), input_bytes.data(), input_bytes.size());
  const auto quantizer = loom::test::make_quantizer();
  auto backend = loom::test::make_cpu_backend();
  for (const auto& [name, hex] : golden.at("types").items()) {
    INFO("format " << name);
    const auto type = loom::dtype_from_name(name);
    REQUIRE(type.has_value());
    REQUIRE(quantizer->has_format(*type));
    const std::vector<uint8_t> expected = from_hex(hex);
    const std::vector<uint8_t> bytes = quantizer->quantize(*type, x, n_rows, n_cols);
    REQUIRE(bytes.size() == expected.size());
    size_t first_diff = 0;
    while (first_diff < bytes.size() && bytes[first_diff] == expected[first_diff]) ++first_diff;
    INFO("first differing byte " << first_diff << " of " << bytes.size());
    CHECK(first_diff == bytes.size());
    // The plugin's decoder and the CPU backend's agree value for value on these bytes.
    const std::vector<float> own = quantizer->dequantize(*type, bytes, n_rows, n_cols);
    CHECK(own == backend_decode(*backend, *type, bytes, n_rows, n_cols));
  }
}
