#include "model/hadamard.h"

#include <cmath>

namespace loom {

bool kv_dtype_rotates(loom_dtype dtype) {
  return dtype == LOOM_DTYPE_Q8_0 || dtype == LOOM_DTYPE_Q4_0 || dtype == LOOM_DTYPE_INT8_KV;
}

std::vector<float> hadamard_matrix(int64_t n) {
  // Sylvester: H(2m) = [[H(m), H(m)], [H(m), -H(m)]], so entry (i, j) is (-1)^popcount(i & j).
  std::vector<float> h(static_cast<size_t>(n * n));
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      h[static_cast<size_t>(i * n + j)] = __builtin_popcountll(static_cast<uint64_t>(i & j)) % 2 ? -scale : scale;
    }
  }
  return h;
}

int64_t key_rotation_size(int64_t head_dim) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  int64_t n = 64;
  while (head_dim % (2 * n) == 0) n *= 2;
  return n;
}

int64_t value_rotation_size(int64_t head_dim) { return head_dim > 0 && head_dim % 64 == 0 ? 64 : 0; }

}  // namespace loom
