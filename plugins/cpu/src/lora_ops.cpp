#include "lora_ops.h"

#include <algorithm>
#include <string>
#include <vector>

namespace loom::cpu {

namespace {

// Below this many multiply-adds a pass runs on the calling thread: waking the pool costs more than a
// decode row's smallest adapter passes (measured with `loom bench --lora-rank`: 2^13 beats 2^16 there).
constexpr int64_t kSerialMacs = 1 << 13;
// Rows of A, or outputs, per pool task when a pass is spread.
constexpr int64_t kRowsPerTask = 32;
constexpr int64_t kOutputsPerTask = 256;

// Row r (of slot s) of an F32 or F16 matrix as floats: the row itself for F32, else widened into
// `scratch` (F16 widens exactly).
const float* row_as_floats(const Tensor& t, int64_t r, int64_t slot, std::vector<float>& scratch) {
  const uint8_t* row = t.at(r, slot);
  if (t.dtype == LOOM_DTYPE_F32) return reinterpret_cast<const float*>(row);
  scratch.resize(size_t(t.ne[0]));
  const auto* h = reinterpret_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < t.ne[0]; i++) scratch[size_t(i)] = half_to_float(h[i]);
  return scratch.data();
}

// fn(first, last) over [0, n): in one call when the pass is small, else in chunks of `per_task` on the pool.
void spread(int64_t n, int64_t per_task, int64_t macs, const TaskRunner& run, const std::function<void(int64_t, int64_t)>& fn) {
  if (macs < kSerialMacs) return fn(0, n);
  run((n + per_task - 1) / per_task, [&](int64_t task) { fn(task * per_task, std::min(n, (task + 1) * per_task)); });
}

}  // namespace

void axpy_f16_in_order(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * half_to_float(x[i]);
}

void lora(const OpArgs& a, const TaskRunner& run, const LoraKernels& k) {
  const Tensor &A = a.src[0], &Bt = a.src[1], &x = a.src[2], &slots = a.src[3], &scales = a.src[4];
  const int64_t n_in = A.ne[0], rank = A.ne[1], n_slots = A.ne[2], n_out = Bt.ne[0], n_tok = x.ne[1];
  const auto* slot_of = reinterpret_cast<const int32_t*>(slots.data);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n_slots));
  for (int64_t t = 0; t < n_tok; t++) {
    const int32_t s = slot_of[t];
    if (s < -1 || s >= n_slots) invalid("LORA: src3 (slots) holds " + std::to_string(s) + " for row " + std::to_string(t) + ", not -1 or 0.." + std::to_string(n_slots - 1));
    if (s >= 0) rows[size_t(s)].push_back(t);
  }
  std::vector<float> down;  // [rows of the slot][rank]: A_s · x, times the slot's scale
  for (int64_t s = 0; s < n_slots; s++) {
    const std::vector<int64_t>& mine = rows[size_t(s)];
    if (mine.empty()) continue;
    const float scale = reinterpret_cast<const float*>(scales.data)[s];
    const int64_t n = int64_t(mine.size());
    down.assign(size_t(rank * n), 0.0f);
    spread(rank, kRowsPerTask, rank * n * n_in, run, [&](int64_t j0, int64_t j1) {
      thread_local std::vector<float> scratch;
      for (int64_t j = j0; j < j1; j++) {
        const float* a_row = row_as_floats(A, j, s, scratch);
        for (int64_t i = 0; i < n; i++) down[size_t(i * rank + j)] = scale * k.dot(a_row, reinterpret_cast<const float*>(x.at(mine[size_t(i)])), n_in);
      }
    });
    // dst[:, t] += sum_j down[t, j] * column j of B: one axpy along the outputs per rank row.
    spread(n_out, kOutputsPerTask, n_out * n * rank, run, [&](int64_t o0, int64_t o1) {
      for (int64_t i = 0; i < n; i++) {
        float* out = reinterpret_cast<float*>(a.dst.at(mine[size_t(i)])) + o0;
        for (int64_t j = 0; j < rank; j++) {
          const float d = down[size_t(i * rank + j)];
          if (Bt.dtype == LOOM_DTYPE_F32) k.axpy(d, reinterpret_cast<const float*>(Bt.at(j, s)) + o0, out, o1 - o0);
          else k.axpy_f16(d, reinterpret_cast<const uint16_t*>(Bt.at(j, s)) + o0, out, o1 - o0);
        }
      }
    });
  }
}

}  // namespace loom::cpu
