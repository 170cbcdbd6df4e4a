// The fast MOE_MATMUL: the batch's (token, expert) rows grouped by expert, so each chosen expert's
// matrix is read once per op however many tokens chose it, through the dense matmul kernels; all
// the chosen experts share one batched pass over the pool.
#include <algorithm>
#include <vector>

#include "fast_internal.h"
#include "moe_ops.h"

namespace loom::cpu {

namespace {

// A contiguous F32 view [ne0, rows] of `data`.
Tensor f32_rows(float* data, int64_t ne0, int64_t rows) {
  Tensor t;
  t.dtype = LOOM_DTYPE_F32;
  t.data = reinterpret_cast<uint8_t*>(data);
  t.ne[0] = ne0;
  t.ne[1] = rows;
  t.nb[0] = sizeof(float);
  t.nb[1] = uint64_t(ne0) * sizeof(float);
  t.nb[2] = t.nb[3] = t.nb[1] * uint64_t(rows);
  return t;
}

// Expert e's matrix [n_in, n_out] as a plain MATMUL weight.
Tensor expert_matrix(const Tensor& w, int64_t e) {
  Tensor t = w;
  t.data = w.at(0, e);
  t.ne[2] = 1;
  t.nb[3] = t.nb[2] = w.nb[1] * uint64_t(w.ne[1]);
  return t;
}

}  // namespace

void fast_moe_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k, MoeCounters& counters) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const ExpertGroups groups = group_rows_by_expert(a);
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_used = a.src[2].ne[0], n_expert = w.ne[2];
  auto x_row = [&](int64_t row) { return reinterpret_cast<float*>(x.at(x.ne[1] == 1 ? 0 : row % n_used, row / n_used)); };
  auto dst_row = [&](int64_t row) { return reinterpret_cast<float*>(dst.at(row % n_used, row / n_used)); };

  // dst row += the expert's bias row, when there is one.
  auto add_bias = [&](int64_t e, float* out) {
    if (!a.src[3].present()) return;
    const auto* b = reinterpret_cast<const float*>(a.src[3].at(e));
    for (int64_t o = 0; o < n_out; o++) out[o] += b[o];
  };
  counters.ops++;
  // One token reading one activation row for all its experts (gate and up at batch 1): one decode
  // group, which quantizes the row once and runs every expert in one pass.
  bool one_row_each = true;
  for (int64_t e = 0; e < n_expert; e++) one_row_each = one_row_each && groups.first[size_t(e) + 1] - groups.first[size_t(e)] <= 1;
  if (x.ne[1] == 1 && x.n_rows() == 1 && one_row_each) {
    std::vector<OpArgs> experts;
    for (int64_t e = 0; e < n_expert; e++) {
      const int64_t r0 = groups.first[size_t(e)];
      if (groups.first[size_t(e) + 1] == r0) continue;
      counters.expert_reads++;
      counters.rows++;
      OpArgs sub;
      sub.type = LOOM_OP_MATMUL;
      sub.n_src = 2;
      sub.src[0] = expert_matrix(w, e);
      sub.src[1] = f32_rows(x_row(groups.rows[size_t(r0)]), n_in, 1);
      sub.dst = f32_rows(dst_row(groups.rows[size_t(r0)]), n_out, 1);
      experts.push_back(sub);
    }
    std::vector<const OpArgs*> ops;
    for (const OpArgs& sub : experts) ops.push_back(&sub);
    fast_matmul_decode_group(ops.data(), int(ops.size()), pool, k);
    for (int64_t e = 0; e < n_expert; e++)
      if (groups.first[size_t(e) + 1] > groups.first[size_t(e)]) add_bias(e, dst_row(groups.rows[size_t(groups.first[size_t(e)])]));
    return;
  }
  // Otherwise the chosen experts run together as one batched pass (fast_matmul_batched), each on the rows
  // that chose it gathered.
  std::vector<OpArgs> batched;
  std::vector<int64_t> batched_experts;
  int64_t gathered_rows = 0;
  for (int64_t e = 0; e < n_expert; e++) {
    const int64_t m = groups.first[size_t(e) + 1] - groups.first[size_t(e)];
    if (m == 0) continue;
    counters.expert_reads++;
    counters.rows += uint64_t(m);
    OpArgs sub;
    sub.type = LOOM_OP_MATMUL;
    sub.n_src = 2;
    sub.src[0] = expert_matrix(w, e);
    batched.push_back(sub);
    batched_experts.push_back(e);
    gathered_rows += m;
  }
  if (batched.empty()) return;

  static thread_local std::vector<float> gathered, results;  // the calling thread's, reused
  gathered.resize(size_t(gathered_rows * n_in));
  results.resize(size_t(gathered_rows * n_out));
  std::vector<const OpArgs*> ops;
  int64_t at = 0;
  for (size_t i = 0; i < batched.size(); i++) {
    const int64_t e = batched_experts[i], r0 = groups.first[size_t(e)], m = groups.first[size_t(e) + 1] - r0;
    for (int64_t j = 0; j < m; j++) std::copy_n(x_row(groups.rows[size_t(r0 + j)]), n_in, gathered.data() + (at + j) * n_in);
    batched[i].src[1] = f32_rows(gathered.data() + at * n_in, n_in, m);
    batched[i].dst = f32_rows(results.data() + at * n_out, n_out, m);
    ops.push_back(&batched[i]);
    at += m;
  }
  fast_matmul_batched(ops.data(), int(ops.size()), pool, k);
  at = 0;
  for (size_t i = 0; i < batched.size(); i++) {
    const int64_t e = batched_experts[i], r0 = groups.first[size_t(e)], m = groups.first[size_t(e) + 1] - r0;
    for (int64_t j = 0; j < m; j++) {
      float* out = dst_row(groups.rows[size_t(r0 + j)]);
      std::copy_n(results.data() + (at + j) * n_out, n_out, out);
      add_bias(e, out);
    }
    at += m;
  }
}

}  // namespace loom::cpu
