// Fast MATMUL: dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ working directly on the blocks.
// This file holds decode (one activation row, quantized once); batches of rows go to
// fast_matmul_batched.cpp.
//
// Consecutive decode matmuls of the same activation row (q, k and v; gate and up) run as one group:
// one pass over the pool whose chunks span all their weights, so the threads wait for each other
// once per group instead of once per matrix, and the small k and v projections do not each pay a
// start and an uneven finish of their own.
#include <algorithm>
#include <vector>

#include "fast_internal.h"
#include "matmul_plan.h"

namespace loom::cpu {
namespace {

// Scratch for quantized activations, reused across calls (FastOps serialises callers).
std::vector<uint8_t>& scratch() {
  static thread_local std::vector<uint8_t> buffer;
  return buffer;
}

bool is_decode_matmul(const OpArgs& a) {
  return a.type == LOOM_OP_MATMUL && a.src[1].n_rows() == 1 && a.dst.nb[0] == sizeof(float);
}

// The bytes a tensor view can touch, [first, last).
std::pair<const uint8_t*, const uint8_t*> extent(const Tensor& t) {
  uint64_t last_row = 0;
  for (int d = 1; d < 4; d++) last_row += uint64_t(t.ne[d] - 1) * t.nb[d];
  return {t.data, t.data + last_row + row_bytes(t.dtype, t.ne[0])};
}

// One matmul of a decode group: its kernel, its activation row and its chunks of output rows.
struct DecodeJob {
  const OpArgs* op;
  MatmulPlan plan;
  const uint8_t* act;
  int64_t rows_per_chunk;
  int64_t first_chunk;  // in the group's numbering
};

}  // namespace

bool overlap(const Tensor& a, const Tensor& b) {
  const auto [a0, a1] = extent(a);
  const auto [b0, b1] = extent(b);
  return a0 < b1 && b0 < a1;
}
bool same_view(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.data == b.data && std::equal(a.ne, a.ne + 4, b.ne) && std::equal(a.nb, a.nb + 4, b.nb);
}

bool joins_decode_group(const OpArgs* const* members, int n_members, const OpArgs& next) {
  if (n_members < 1 || !is_decode_matmul(*members[0]) || !is_decode_matmul(next)) return false;
  const Tensor& x = members[0]->src[1];
  if (!same_view(x, next.src[1]) || overlap(members[0]->dst, x) || overlap(next.dst, x)) return false;
  // Members run in any order: next must not write what another reads or writes.
  for (int i = 0; i < n_members; i++)
    if (overlap(next.dst, members[i]->dst) || overlap(next.dst, members[i]->src[0]) || overlap(members[i]->dst, next.src[0])) return false;
  return true;
}

void fast_matmul_decode_group(const OpArgs* const* ops, int n_ops, ThreadPool& pool, const Kernels& k) {
  // Batch invariance: one row takes the tile kernels, as it would in any batch (the group's members
  // are independent, so they still share one pass).
  if (k.tiles_only) return fast_matmul_batched(ops, n_ops, pool, k);
  // Activation rows: one per distinct quantizer (q and k of the same type share theirs).
  std::vector<DecodeJob> jobs;
  std::vector<size_t> act_offsets;
  size_t act_bytes = 0;
  for (int i = 0; i < n_ops; i++) {
    const Tensor& w = ops[i]->src[0];
    const MatmulPlan plan = plan_for(w.dtype, w.ne[0], k);
    const size_t bytes = plan.dot.rows_quantize ? size_t(kRowsActivationBytes(w.ne[0])) : plan.act_row_bytes;
    act_offsets.push_back(act_bytes);
    act_bytes += (bytes + 63) / 64 * 64;
    jobs.push_back({ops[i], plan, nullptr, 0, 0});
  }
  std::vector<uint8_t>& act = scratch();
  if (act.size() < act_bytes) act.resize(act_bytes);
  int64_t n_chunks = 0;
  for (int i = 0; i < n_ops; i++) {
    DecodeJob& job = jobs[size_t(i)];
    const Tensor &w = job.op->src[0], &x = job.op->src[1];
    int shared = 0;
    while (shared < i && !(jobs[size_t(shared)].plan.format == job.plan.format &&
                           jobs[size_t(shared)].plan.dot.rows_quantize == job.plan.dot.rows_quantize))
      shared++;
    if (shared < i) {
      job.act = jobs[size_t(shared)].act;
    } else {
      uint8_t* out = act.data() + act_offsets[size_t(i)];
      quantize_activation(job.plan, job.plan.dot.rows_quantize, k, x.frow(0), out, w.ne[0]);
      job.act = out;
    }
    // Chunks of at most ~256 KiB of weights (the output matrix's were 22 MB: the thread that finished
    // first idled while the other read its last chunk alone; paired runs +1.5-2.5 points of
    // bandwidth), and at least four per thread per matrix for dynamic balance.
    const int64_t n_out = w.ne[1];
    const uint64_t w_row_bytes = std::max<uint64_t>(row_bytes(w.dtype, w.ne[0]), 1);
    job.rows_per_chunk = std::min<int64_t>(chunk_size(n_out, pool.size(), 4), std::max<int64_t>(16, int64_t((256u << 10) / w_row_bytes)));
    job.first_chunk = n_chunks;
    n_chunks += (n_out + job.rows_per_chunk - 1) / job.rows_per_chunk;
  }
  pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
    size_t j = jobs.size() - 1;
    while (jobs[j].first_chunk > chunk) j--;
    const DecodeJob& job = jobs[j];
    const Tensor &w = job.op->src[0], &dst = job.op->dst;
    const int64_t r0 = (chunk - job.first_chunk) * job.rows_per_chunk, r1 = std::min(w.ne[1], r0 + job.rows_per_chunk);
    job.plan.dot.rows(w.ne[0], w.at(r0), size_t(w.nb[1]), r1 - r0, job.act, dst.frow(0) + r0);
  });
}

void fast_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const OpArgs* one = &a;
  if (is_decode_matmul(a) && !k.tiles_only) return fast_matmul_decode_group(&one, 1, pool, k);
  fast_matmul_batched(&one, 1, pool, k);
}

}  // namespace loom::cpu
