// The rotation quantized KV caches apply (model/hadamard.h): orthonormal and its own inverse, so
// scores and the attention output are unchanged up to rounding; sizes as llama.cpp picks them.
#include <catch2/catch.hpp>

#include <cmath>

#include "model/hadamard.h"

TEST_CASE("hadamard: the rotation is orthonormal and undoes itself", "[kv][hadamard]") {
  for (int64_t n : {64, 128, 256, 512}) {
    INFO("n = " << n);
    const auto h = loom::hadamard_matrix(n);
    REQUIRE(h.size() == size_t(n * n));
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        CHECK(h[size_t(i * n + j)] == h[size_t(j * n + i)]);  // symmetric
        double dot = 0;
        for (int64_t k = 0; k < n; ++k) dot += double(h[size_t(i * n + k)]) * h[size_t(k * n + j)];
        worst = std::max(worst, std::fabs(dot - (i == j ? 1.0 : 0.0)));
      }
    }
    CHECK(worst < 1e-5);  // H·H = I
    // Every entry has the same magnitude: an outlier channel is spread over the whole block.
    for (float x : h) CHECK(std::fabs(std::fabs(x) - 1.0f / std::sqrt(float(n))) < 1e-7f);
  }
}

TEST_CASE("hadamard: keys turn by the largest power of two dividing the head size, values by 64", "[kv][hadamard]") {
  CHECK(loom::key_rotation_size(64) == 64);
  CHECK(loom::key_rotation_size(128) == 128);
  CHECK(loom::key_rotation_size(192) == 64);
  CHECK(loom::key_rotation_size(256) == 256);
  CHECK(loom::key_rotation_size(80) == 0);  // not a multiple of 64: no rotation
  CHECK(loom::value_rotation_size(256) == 64);
  CHECK(loom::value_rotation_size(96) == 0);
}
