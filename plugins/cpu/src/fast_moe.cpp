// The fast MOE_MATMUL: the batch's (token, expert) rows grouped by expert, so each chosen expert's
// matrix is read once per op however many tokens chose it, through the dense matmul kernels; all
// the chosen experts share one batched pass over the pool, and so do consecutive ops of the same
// activations and routing (a layer's gate and up).
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

bool joins_moe_group(const OpArgs& first, const OpArgs& next) {
  if (first.type != LOOM_OP_MOE_MATMUL || next.type != LOOM_OP_MOE_MATMUL) return false;
  if (!same_view(first.src[1], next.src[1]) || !same_view(first.src[2], next.src[2]) || first.src[0].ne[2] != next.src[0].ne[2])
    return false;
  // Run together, neither may write what the other reads or writes.
  for (const Tensor* t : {&next.src[0], &next.src[1], &next.src[2], &next.src[3], &next.dst})
    if (t->present() && overlap(first.dst, *t)) return false;
  for (const Tensor* t : {&first.src[0], &first.src[1], &first.src[2], &first.src[3]})
    if (t->present() && overlap(next.dst, *t)) return false;
  return true;
}

void fast_moe_matmul_group(const OpArgs* const* ops, int n_ops, ThreadPool& pool, const Kernels& k, MoeCounters& counters) {
  // The ops share their activations and routing (joins_moe_group), so the grouping and the gathered
  // rows serve them all; each expert of each op is one matmul of the pass.
  const OpArgs& a0 = *ops[0];
  const Tensor& x = a0.src[1];
  const ExpertGroups groups = group_rows_by_expert(a0);
  const int64_t n_in = a0.src[0].ne[0], n_used = a0.src[2].ne[0], n_expert = a0.src[0].ne[2];
  auto x_row = [&](int64_t row) { return reinterpret_cast<float*>(x.at(x.ne[1] == 1 ? 0 : row % n_used, row / n_used)); };
  auto dst_row = [&](const OpArgs& a, int64_t row) { return reinterpret_cast<float*>(a.dst.at(row % n_used, row / n_used)); };
  auto rows_of = [&](int64_t e) { return groups.first[size_t(e) + 1] - groups.first[size_t(e)]; };
  // dst row += the expert's bias row, when the op has one.
  auto add_bias = [&](const OpArgs& a, int64_t e, float* out) {
    if (!a.src[3].present()) return;
    const auto* b = reinterpret_cast<const float*>(a.src[3].at(e));
    for (int64_t o = 0; o < a.dst.ne[0]; o++) out[o] += b[o];
  };
  auto matmul = [](const Tensor& w, int64_t e) {
    OpArgs sub;
    sub.type = LOOM_OP_MATMUL;
    sub.n_src = 2;
    sub.src[0] = expert_matrix(w, e);
    return sub;
  };
  for (int i = 0; i < n_ops; i++) {
    counters.ops++;
    for (int64_t e = 0; e < n_expert; e++)
      if (rows_of(e) > 0) counters.expert_reads++, counters.rows += uint64_t(rows_of(e));
  }

  // One token reading one activation row for all its experts (gate and up at batch 1): one decode
  // group, which quantizes the row once and runs every expert of every op in one pass.
  bool one_row_each = true;
  for (int64_t e = 0; e < n_expert; e++) one_row_each = one_row_each && rows_of(e) <= 1;
  if (x.ne[1] == 1 && x.n_rows() == 1 && one_row_each) {
    std::vector<OpArgs> experts;
    for (int i = 0; i < n_ops; i++)
      for (int64_t e = 0; e < n_expert; e++) {
        if (rows_of(e) == 0) continue;
        const int64_t row = groups.rows[size_t(groups.first[size_t(e)])];
        OpArgs sub = matmul(ops[i]->src[0], e);
        sub.src[1] = f32_rows(x_row(row), n_in, 1);
        sub.dst = f32_rows(dst_row(*ops[i], row), ops[i]->dst.ne[0], 1);
        experts.push_back(sub);
      }
    std::vector<const OpArgs*> list;
    for (const OpArgs& sub : experts) list.push_back(&sub);
    fast_matmul_decode_group(list.data(), int(list.size()), pool, k);
    for (int i = 0; i < n_ops; i++)
      for (int64_t e = 0; e < n_expert; e++)
        if (rows_of(e) > 0) add_bias(*ops[i], e, dst_row(*ops[i], groups.rows[size_t(groups.first[size_t(e)])]));
    return;
  }

  // Otherwise each chosen expert's rows are gathered once, and every (op, expert) matmul runs in one
  // batched pass (fast_matmul_batched).
  static thread_local std::vector<float> gathered, results;  // the calling thread's, reused
  gathered.resize(groups.rows.size() * size_t(n_in));
  for (size_t j = 0; j < groups.rows.size(); j++) std::copy_n(x_row(groups.rows[j]), n_in, gathered.data() + j * size_t(n_in));
  std::vector<size_t> results_at(size_t(n_ops) + 1, 0);
  for (int i = 0; i < n_ops; i++) results_at[size_t(i) + 1] = results_at[size_t(i)] + groups.rows.size() * size_t(ops[i]->dst.ne[0]);
  results.resize(results_at.back());
  std::vector<OpArgs> batched;
  for (int i = 0; i < n_ops; i++) {
    const int64_t n_out = ops[i]->dst.ne[0];
    for (int64_t e = 0; e < n_expert; e++) {
      if (rows_of(e) == 0) continue;
      const int64_t r0 = groups.first[size_t(e)];
      OpArgs sub = matmul(ops[i]->src[0], e);
      sub.src[1] = f32_rows(gathered.data() + r0 * n_in, n_in, rows_of(e));
      sub.dst = f32_rows(results.data() + results_at[size_t(i)] + size_t(r0 * n_out), n_out, rows_of(e));
      batched.push_back(sub);
    }
  }
  std::vector<const OpArgs*> list;
  for (const OpArgs& sub : batched) list.push_back(&sub);
  fast_matmul_batched(list.data(), int(list.size()), pool, k);
  for (int i = 0; i < n_ops; i++) {
    const int64_t n_out = ops[i]->dst.ne[0];
    for (int64_t e = 0; e < n_expert; e++)
      for (int64_t r = groups.first[size_t(e)]; r < groups.first[size_t(e) + 1]; r++) {
        float* out = dst_row(*ops[i], groups.rows[size_t(r)]);
        std::copy_n(results.data() + results_at[size_t(i)] + size_t(r * n_out), n_out, out);
        add_bias(*ops[i], e, out);
      }
  }
}

void fast_moe_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k, MoeCounters& counters) {
  const OpArgs* one = &a;
  fast_moe_matmul_group(&one, 1, pool, k, counters);
}

}  // namespace loom::cpu
