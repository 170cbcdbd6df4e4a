// The block formats the CPU backend decodes row by row (Q4_1, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS)
// against gguf-py, ggml's own Python decoder (tests/data/dequant-gguf-py.json, written by
// scripts/make_dequant_golden.py): GET_ROWS and a MATMUL by one-hot rows, on the reference and the
// fast kernels.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "gguf/dtype_traits.h"
#include "test_model_helpers.h"
#include "test_paths.h"

namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

// Row 0 of a one-row table of `type`, decoded by the backend: GET_ROWS, and MATMUL against one-hot
// activation rows (which picks each weight through the matmul kernels).
std::pair<std::vector<float>, std::vector<float>> decode(loom::Backend& backend, loom_dtype type,
                                                         const std::vector<uint8_t>& bytes, int64_t n) {
  using loom::tensor_view;
  auto weights = backend.alloc(bytes.size(), LOOM_BUFFER_USAGE_WEIGHTS);
  backend.upload(weights, 0, bytes.data(), bytes.size());
  // Scratch: ids, the GET_ROWS output [n], one-hot activations [n, 8] and the MATMUL output [1, 8].
  constexpr int64_t kProbes = 8;
  auto scratch = backend.alloc(4096 + uint64_t(n) * 4 * (kProbes + 2), LOOM_BUFFER_USAGE_COMPUTE);
  const int32_t id = 0;
  backend.upload(scratch, 0, &id, 4);
  std::vector<float> one_hot(size_t(n * kProbes), 0.0f);
  for (int64_t p = 0; p < kProbes; p++) one_hot[size_t(p * n + (p * 37) % n)] = 1.0f;
  const uint64_t act_at = 256 + uint64_t(n) * 4, mm_at = act_at + uint64_t(n) * 4 * kProbes;
  backend.upload(scratch, act_at, one_hot.data(), one_hot.size() * 4);
  const loom_tensor table = tensor_view(weights, 0, type, n, 1);
  const std::vector<loom_op> ops = {
      loom::make_op(LOOM_OP_GET_ROWS, tensor_view(scratch, 256, LOOM_DTYPE_F32, n, 1),
                    {table, tensor_view(scratch, 0, LOOM_DTYPE_I32, 1)}),
      loom::make_op(LOOM_OP_MATMUL, tensor_view(scratch, mm_at, LOOM_DTYPE_F32, 1, kProbes),
                    {table, tensor_view(scratch, act_at, LOOM_DTYPE_F32, n, kProbes)}),
  };
  backend.run(ops);
  std::vector<float> rows(static_cast<size_t>(n));
  std::vector<float> picked(kProbes);
  backend.download(rows.data(), scratch, 256, rows.size() * 4);
  backend.download(picked.data(), scratch, mm_at, picked.size() * 4);
  backend.synchronize();
  return {rows, picked};
}

}  // namespace

TEST_CASE("GGUF block formats decode as gguf-py decodes them, through GET_ROWS and MATMUL", "[dequant][golden]") {
  std::ifstream in(loom::test::source_dir() / "tests" / "data" / "dequant-gguf-py.json");
  REQUIRE(in);
  const auto golden = nlohmann::json::parse(in);
  for (bool reference : {true, false}) {
    auto backend = loom::test::cpu_backend(reference);
    for (const auto& [name, entry] : golden.at("types").items()) {
      INFO((reference ? "reference" : "fast") << " kernels, " << name);
      const auto type = loom::dtype_from_name(name);
      REQUIRE(type);
      REQUIRE(backend->supports_weight_dtype(*type));
      const auto expected = entry.at("values").get<std::vector<float>>();
      const auto n = static_cast<int64_t>(expected.size());
      const auto [rows, picked] = decode(*backend, *type, from_hex(entry.at("bytes_hex")), n);
      // Both decoders compute d * scale * q - min in float; allow for a different grouping of that
      // product (one rounding step of the largest value).
      float largest = 0.0f;
      for (float v : expected) largest = std::max(largest, std::fabs(v));
      const float tolerance = largest * 1e-6f;
      size_t n_off = 0;
      for (int64_t i = 0; i < n; i++) n_off += std::fabs(rows[size_t(i)] - expected[size_t(i)]) > tolerance;
      CHECK(n_off == 0);
      for (int64_t p = 0; p < 8; p++) {
        CHECK(picked[size_t(p)] == Approx(expected[size_t((p * 37) % n)]).margin(tolerance));
      }
    }
  }
}
