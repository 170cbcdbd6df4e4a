// Fast MATMUL: dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ working directly on the blocks.
//
// 1. The activation rows are quantized once (Q8 blocks for Q4_0/Q8_0, Q8_K for Q4_K/Q6_K) or kept as
//    F32 (F16/BF16/F32 weights).
// 2. Threads take chunks of output rows. Within a chunk, tokens go in tiles of kMaxTile: each weight
//    block is unpacked once per tile, and the chunk (sized to stay in L2) is re-read from cache, not
//    memory, for the next tile.
// 3. Decode (one token): consecutive matmuls of the same activation row (q, k and v; gate and up)
//    run as one group: one pass over the pool whose chunks span all their weights, so the threads
//    wait for each other once per group instead of once per matrix, and the small k and v
//    projections do not each pay a start and an uneven finish of their own.
#include <algorithm>
#include <vector>

#include "fast_internal.h"
#include "kernels_dequant.h"

namespace loom::cpu {
namespace {

enum class ActFormat { q8, q8k, f32 };

struct MatmulPlan {
  ActFormat format;
  WeightKernels dot;
  size_t act_row_bytes;
};

MatmulPlan plan_for(loom_dtype type, int64_t n_in, const Kernels& k) {
  switch (type) {
    case LOOM_DTYPE_Q4_0: return {ActFormat::q8, k.q4_0, size_t(n_in / 32) * sizeof(BlockQ8)};
    case LOOM_DTYPE_Q5_0: return {ActFormat::q8, k.q5_0, size_t(n_in / 32) * sizeof(BlockQ8)};
    case LOOM_DTYPE_Q8_0: return {ActFormat::q8, k.q8_0, size_t(n_in / 32) * sizeof(BlockQ8)};
    case LOOM_DTYPE_Q4_K: return {ActFormat::q8k, k.q4_k, size_t(n_in / 256) * sizeof(BlockQ8K)};
    case LOOM_DTYPE_Q6_K: return {ActFormat::q8k, k.q6_k, size_t(n_in / 256) * sizeof(BlockQ8K)};
    case LOOM_DTYPE_F16: return {ActFormat::f32, k.f16, size_t(n_in) * 4};
    case LOOM_DTYPE_BF16: return {ActFormat::f32, k.bf16, size_t(n_in) * 4};
    case LOOM_DTYPE_F32: return {ActFormat::f32, k.f32, size_t(n_in) * 4};
    default: {
      // Types whose integer kernels only some tables have.
      const WeightKernels* integer = type == LOOM_DTYPE_Q5_K     ? &k.q5_k
                                     : type == LOOM_DTYPE_Q2_K   ? &k.q2_k
                                     : type == LOOM_DTYPE_Q3_K   ? &k.q3_k
                                     : type == LOOM_DTYPE_IQ4_XS ? &k.iq4_xs
                                     : type == LOOM_DTYPE_Q4_1   ? &k.q4_1
                                     : type == LOOM_DTYPE_Q5_1   ? &k.q5_1
                                     : type == LOOM_DTYPE_IQ4_NL ? &k.iq4_nl
                                     : type == LOOM_DTYPE_MXFP4  ? &k.mxfp4
                                                                 : nullptr;
      if (integer != nullptr && integer->tile != nullptr) {
        const bool super_blocks = type == LOOM_DTYPE_Q5_K || type == LOOM_DTYPE_IQ4_XS || type == LOOM_DTYPE_Q2_K ||
                                  type == LOOM_DTYPE_Q3_K;
        return super_blocks ? MatmulPlan{ActFormat::q8k, *integer, size_t(n_in / 256) * sizeof(BlockQ8K)}
                            : MatmulPlan{ActFormat::q8, *integer, size_t(n_in / 32) * sizeof(BlockQ8)};
      }
      const WeightKernels decoded = dequant_kernels(type, k);
      if (decoded.tile == nullptr) unsupported(std::string("MATMUL: weight dtype ") + dtype_name(type) + " has no fast kernel");
      return {ActFormat::f32, decoded, size_t(n_in) * 4};
    }
  }
}

// Scratch for quantized activations, reused across calls (FastOps serialises callers).
std::vector<uint8_t>& scratch() {
  static thread_local std::vector<uint8_t> buffer;
  return buffer;
}

// One activation row in the format the kernel reads: its own layout when it brings a quantizer
// (own_layout), else the weight type's usual one.
void quantize_activation(const MatmulPlan& plan, RowsQuantizeFn own_layout, const Kernels& k, const float* row, void* out, int64_t n) {
  if (own_layout) own_layout(row, out, n);
  else if (plan.format == ActFormat::q8) k.quantize_q8(row, static_cast<BlockQ8*>(out), n);
  else if (plan.format == ActFormat::q8k) k.quantize_q8k(row, static_cast<BlockQ8K*>(out), n);
  else std::copy(row, row + n, static_cast<float*>(out));
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
bool overlap(const Tensor& a, const Tensor& b) {
  const auto [a0, a1] = extent(a);
  const auto [b0, b1] = extent(b);
  return a0 < b1 && b0 < a1;
}
bool same_view(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.data == b.data && std::equal(a.ne, a.ne + 4, b.ne) && std::equal(a.nb, a.nb + 4, b.nb);
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

// The values an activation row takes in the integer kernels: rounded to the weight type's int8
// blocks (q x d per value) when its plan quantizes, unchanged when it reads floats.
void round_like_integer_kernels(const MatmulPlan& plan, const Kernels& k, const float* row, float* out, int64_t n) {
  if (plan.format == ActFormat::q8) {
    std::vector<BlockQ8> blocks(size_t(n / 32));
    k.quantize_q8(row, blocks.data(), n);
    for (int64_t i = 0; i < n; i++) out[i] = float(blocks[size_t(i / 32)].qs[i % 32]) * blocks[size_t(i / 32)].d;
  } else if (plan.format == ActFormat::q8k) {
    std::vector<BlockQ8K> blocks(size_t(n / 256));
    k.quantize_q8k(row, blocks.data(), n);
    for (int64_t i = 0; i < n; i++) out[i] = float(blocks[size_t(i / 256)].qs[i % 256]) * blocks[size_t(i / 256)].d;
  } else {
    std::copy(row, row + n, out);
  }
}

// Batched matmul as float GEMM (Kernels::float_gemm): threads take chunks of weight rows, decode each
// chunk to floats once (sized to stay in L2) and multiply it with every activation row.
//
// Batch invariance: the activations first take the int8 rounding the one-row kernels give them, so a
// sequence's logits are the same (to float summation order) whether it ran alone or in a batch of 16:
// the integer kernels' block sums are exact, and so, to rounding, are these float ones.
//
// Types without a vector decoder use the reference one (dequantize_row), a few ns per value: worth it
// only when many tokens share each decoded row, as in prefill.
constexpr int64_t kReferenceDecodeMinTokens = 64;

bool try_float_gemm(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  if (k.float_gemm.gemm == nullptr || n_tok < k.gemm_min_tokens || n_in % 8 != 0) return false;
  const RowDecodeFn fast_decode = k.float_gemm.decoder(w.dtype);
  if (fast_decode == nullptr && n_tok < kReferenceDecodeMinTokens) return false;
  const MatmulPlan plan = plan_for(w.dtype, n_in, k);
  // Contiguous output rows, as the model's matmuls have them; activations in the table's usual
  // format for the type (not a kernel-specific layout the rounding above would not reproduce).
  const bool dst_rows = dst.nb[0] == sizeof(float) && dst.ne[2] == 1 && dst.ne[3] == 1 && dst.nb[1] % sizeof(float) == 0;
  if (!dst_rows || plan.dot.rows_quantize != nullptr || plan.dot.tile_quantize != nullptr) return false;

  // The calling thread's buffer (a thread_local named inside the lambdas would be each worker's own).
  static thread_local std::vector<float> rounded;
  rounded.resize(size_t(n_tok * n_in));
  float* const activations = rounded.data();
  pool.parallel_for(n_tok, [&](int64_t t, int) { round_like_integer_kernels(plan, k, x.frow(t), activations + t * n_in, n_in); });

  // About 64 KiB of decoded rows per chunk, a multiple of the kernel's 3-row blocks.
  const int64_t l2_rows = std::max<int64_t>(3, int64_t((64u << 10) / (uint64_t(n_in) * sizeof(float))) / 3 * 3);
  const int64_t rows = std::min<int64_t>(l2_rows, std::max<int64_t>(3, chunk_size(n_out, pool.size(), 3)));
  const int64_t n_chunks = (n_out + rows - 1) / rows;
  auto* df = reinterpret_cast<float*>(dst.data);
  const int64_t dst_stride = int64_t(dst.nb[1] / sizeof(float));
  pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
    static thread_local std::vector<float> decoded;
    const int64_t r0 = chunk * rows, n_rows = std::min(n_out, r0 + rows) - r0;
    decoded.resize(size_t(n_rows * n_in));
    for (int64_t r = 0; r < n_rows; r++) {
      if (fast_decode) fast_decode(w.at(r0 + r), decoded.data() + r * n_in, n_in);
      else dequantize_row(w.dtype, w.at(r0 + r), decoded.data() + r * n_in, n_in);
    }
    k.float_gemm.gemm(n_in, decoded.data(), n_in, n_rows, activations, n_in, n_tok, df + r0, dst_stride);
  });
  return true;
}

const PanelKernels* panel_kernels(loom_dtype type, const Kernels& k) {
  const PanelKernels* panel = type == LOOM_DTYPE_Q4_0   ? &k.q4_0_panel
                              : type == LOOM_DTYPE_Q5_0 ? &k.q5_0_panel
                              : type == LOOM_DTYPE_Q8_0 ? &k.q8_0_panel
                              : type == LOOM_DTYPE_Q4_K ? &k.q4_k_panel
                              : type == LOOM_DTYPE_Q6_K ? &k.q6_k_panel
                                                        : nullptr;
  return panel != nullptr && panel->dot != nullptr ? panel : nullptr;
}

// Batched matmul through token panels (Kernels::q*_panel): the tokens are quantized into panels of
// kPanelTokens once, then threads take chunks of weight rows (sized to stay in L2) and run every
// panel over each chunk. Lanes past the last token are zero and their sums are dropped.
bool try_panel_gemm(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const PanelKernels* panel = panel_kernels(w.dtype, k);
  if (panel == nullptr || k.panel_min_tokens <= 0 || n_tok < k.panel_min_tokens || n_in % 32 != 0) return false;
  if (dst.nb[0] != sizeof(float) || dst.ne[2] != 1 || dst.ne[3] != 1) return false;

  const int64_t n_panels = (n_tok + kPanelTokens - 1) / kPanelTokens;
  const size_t panel_stride = (panel->bytes(n_in) + 63) / 64 * 64;
  std::vector<uint8_t>& buffer = scratch();
  if (buffer.size() < panel_stride * size_t(n_panels) + 64) buffer.resize(panel_stride * size_t(n_panels) + 64);
  uint8_t* const panels = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  pool.parallel_for(n_panels, [&](int64_t p, int) {
    const int n_valid = int(std::min<int64_t>(kPanelTokens, n_tok - p * kPanelTokens));
    const float* rows[kPanelTokens];
    for (int t = 0; t < n_valid; t++) rows[t] = x.frow(p * kPanelTokens + t);
    panel->quantize(k, rows, n_valid, n_in, panels + size_t(p) * panel_stride);
  });

  // About 64 KiB of weights per chunk, in the kernel's groups of four rows.
  const uint64_t w_row_bytes = std::max<uint64_t>(row_bytes(w.dtype, n_in), 1);
  const int64_t l2_rows = std::max<int64_t>(4, int64_t((64u << 10) / w_row_bytes) / 4 * 4);
  const int64_t rows = std::min<int64_t>(l2_rows, chunk_size(n_out, pool.size(), 4));
  const int64_t n_chunks = (n_out + rows - 1) / rows;
  pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
    static thread_local std::vector<float> sums;
    const int64_t r0 = chunk * rows, n_rows = std::min(n_out, r0 + rows) - r0;
    sums.resize(size_t(n_rows) * kPanelTokens);
    for (int64_t p = 0; p < n_panels; p++) {
      panel->dot(n_in, w.at(r0), size_t(w.nb[1]), n_rows, panels + size_t(p) * panel_stride, sums.data());
      const int n_valid = int(std::min<int64_t>(kPanelTokens, n_tok - p * kPanelTokens));
      for (int t = 0; t < n_valid; t++) {
        float* d = dst.frow(p * kPanelTokens + t) + r0;
        for (int64_t r = 0; r < n_rows; r++) d[r] = sums[size_t(r * kPanelTokens + t)];
      }
    }
  });
  return true;
}

void fast_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  if (is_decode_matmul(a)) {
    const OpArgs* one = &a;
    return fast_matmul_decode_group(&one, 1, pool, k);
  }
  if (try_panel_gemm(a, pool, k)) return;
  if (try_float_gemm(a, pool, k)) return;
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const MatmulPlan plan = plan_for(w.dtype, n_in, k);

  // Activations: one row per token, `stride` bytes apart, in the format the kernel asks for: its own
  // layout when it brings a quantizer for this path, else the weight type's usual format.
  const RowsQuantizeFn own_layout = plan.dot.tile_quantize;
  const size_t row_bytes_needed = own_layout ? size_t(kRowsActivationBytes(n_in)) : plan.act_row_bytes;
  const size_t stride = (row_bytes_needed + 63) / 64 * 64;
  std::vector<uint8_t>& act = scratch();
  if (act.size() < stride * size_t(n_tok)) act.resize(stride * size_t(n_tok));
  pool.parallel_for(n_tok, [&](int64_t t, int) {
    quantize_activation(plan, own_layout, k, x.frow(t), act.data() + size_t(t) * stride, n_in);
  });

  // Rows per chunk: about 64 KiB of weights (stays in L2 while the token tiles pass over it), but
  // small enough that every thread gets several chunks.
  const uint64_t w_row_bytes = row_bytes(w.dtype, n_in);
  const int64_t l2_rows = std::max<int64_t>(1, int64_t((64u << 10) / std::max<uint64_t>(w_row_bytes, 1)));
  const int64_t rows = std::min<int64_t>(chunk_size(n_out, pool.size(), 4), std::max<int64_t>(l2_rows, 4));
  const int64_t n_chunks = (n_out + rows - 1) / rows;
  const bool dst_contiguous = dst.ne[2] == 1 && dst.ne[3] == 1;
  pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
    const int64_t r0 = chunk * rows, r1 = std::min(n_out, r0 + rows);
    float out[kMaxTile];
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTile) {
      const int n_x = int(std::min<int64_t>(kMaxTile, n_tok - t0));
      const uint8_t* xt = act.data() + size_t(t0) * stride;
      for (int64_t r = r0; r < r1; r++) {
        plan.dot.tile(n_in, w.at(r), xt, stride, n_x, out);
        for (int j = 0; j < n_x; j++) {
          float* d = dst_contiguous ? reinterpret_cast<float*>(dst.data + uint64_t(t0 + j) * dst.nb[1]) : dst.frow(t0 + j);
          d[r] = out[j];
        }
      }
    }
  });
}

}  // namespace loom::cpu
