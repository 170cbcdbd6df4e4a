#include "lora_ops.h"

#include <string>
#include <vector>

namespace loom::cpu {

namespace {

// Row r of an F32 or F16 matrix as floats (F16 widens exactly).
void row_as_floats(const Tensor& t, int64_t r, int64_t slot, float* out) {
  const uint8_t* row = t.at(r, slot);
  if (t.dtype == LOOM_DTYPE_F32) {
    std::memcpy(out, row, size_t(t.ne[0]) * 4);
    return;
  }
  const auto* h = reinterpret_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < t.ne[0]; i++) out[i] = half_to_float(h[i]);
}

}  // namespace

void lora(const OpArgs& a, const TaskRunner& run, DotFn dot) {
  const Tensor &A = a.src[0], &B = a.src[1], &x = a.src[2], &slots = a.src[3], &scales = a.src[4];
  const int64_t n_in = A.ne[0], rank = A.ne[1], n_slots = A.ne[2], n_out = B.ne[1], n_tok = x.ne[1];
  const auto* slot_of = reinterpret_cast<const int32_t*>(slots.data);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n_slots));
  for (int64_t t = 0; t < n_tok; t++) {
    const int32_t s = slot_of[t];
    if (s < -1 || s >= n_slots) invalid("LORA: src3 (slots) holds " + std::to_string(s) + " for row " + std::to_string(t) + ", not -1 or 0.." + std::to_string(n_slots - 1));
    if (s >= 0) rows[size_t(s)].push_back(t);
  }
  std::vector<float> down;  // [rank, rows of the slot]: A_s · x
  for (int64_t s = 0; s < n_slots; s++) {
    const std::vector<int64_t>& mine = rows[size_t(s)];
    if (mine.empty()) continue;
    const float scale = reinterpret_cast<const float*>(scales.data)[s];
    const int64_t n = int64_t(mine.size());
    down.assign(size_t(rank * n), 0.0f);
    run(rank, [&](int64_t j) {
      std::vector<float> a_row(static_cast<size_t>(n_in));
      row_as_floats(A, j, s, a_row.data());
      for (int64_t i = 0; i < n; i++) down[size_t(i * rank + j)] = dot(a_row.data(), reinterpret_cast<const float*>(x.at(mine[size_t(i)])), n_in);
    });
    run(n_out, [&](int64_t o) {
      std::vector<float> b_row(static_cast<size_t>(rank));
      row_as_floats(B, o, s, b_row.data());
      for (int64_t i = 0; i < n; i++) {
        float* out = reinterpret_cast<float*>(a.dst.at(mine[size_t(i)]));
        out[o] += scale * dot(b_row.data(), down.data() + i * rank, rank);
      }
    });
  }
}

}  // namespace loom::cpu
