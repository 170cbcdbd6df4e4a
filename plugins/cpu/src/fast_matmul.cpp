// Fast MATMUL: dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ working directly on the blocks.
//
// 1. The activation rows are quantized once (Q8 blocks for Q4_0/Q8_0, Q8_K for Q4_K/Q6_K) or kept as
//    F32 (F16/BF16/F32 weights).
// 2. Threads take chunks of output rows. Within a chunk, tokens go in tiles of kMaxTile: each weight
//    block is unpacked once per tile, and the chunk (sized to stay in L2) is re-read from cache, not
//    memory, for the next tile.
#include <algorithm>
#include <vector>

#include "fast_internal.h"

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
    default: unsupported(std::string("MATMUL: weight dtype ") + dtype_name(type) + " has no fast kernel");
  }
}

// Scratch for quantized activations, reused across calls (FastOps serialises callers).
std::vector<uint8_t>& scratch() {
  static thread_local std::vector<uint8_t> buffer;
  return buffer;
}

}  // namespace

void fast_matmul(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const MatmulPlan plan = plan_for(w.dtype, n_in, k);

  // Activations: one row per token, `stride` bytes apart, in the format the kernel asks for: its own
  // layout when it brings a quantizer for this path, else the weight type's usual format.
  const bool decode = n_tok == 1 && dst.nb[0] == sizeof(float);
  const RowsQuantizeFn own_layout = decode ? plan.dot.rows_quantize : plan.dot.tile_quantize;
  const size_t row_bytes_needed = own_layout ? size_t(kRowsActivationBytes(n_in)) : plan.act_row_bytes;
  const size_t stride = (row_bytes_needed + 63) / 64 * 64;
  std::vector<uint8_t>& act = scratch();
  if (act.size() < stride * size_t(n_tok)) act.resize(stride * size_t(n_tok));
  pool.parallel_for(n_tok, [&](int64_t t, int) {
    const float* row = x.frow(t);
    void* out = act.data() + size_t(t) * stride;
    if (own_layout) own_layout(row, out, n_in);
    else if (plan.format == ActFormat::q8) k.quantize_q8(row, static_cast<BlockQ8*>(out), n_in);
    else if (plan.format == ActFormat::q8k) k.quantize_q8k(row, static_cast<BlockQ8K*>(out), n_in);
    else std::copy(row, row + n_in, static_cast<float*>(out));
  });

  // Rows per chunk: about 64 KiB of weights (stays in L2 while the token tiles pass over it), but
  // small enough that decode gives every thread several chunks.
  const uint64_t w_row_bytes = row_bytes(w.dtype, n_in);
  const int64_t l2_rows = std::max<int64_t>(1, int64_t((64u << 10) / std::max<uint64_t>(w_row_bytes, 1)));
  const int64_t rows = std::min<int64_t>(chunk_size(n_out, pool.size(), 4), n_tok > 1 ? std::max<int64_t>(l2_rows, 4) : 1 << 30);
  const int64_t n_chunks = (n_out + rows - 1) / rows;
  if (decode) {  // row-range kernel, straight into dst
    float* out = dst.frow(0);
    // Chunks of at most ~256 KiB of weights: with a few large chunks (the output matrix's were 22 MB)
    // the thread that finishes first idles while the other reads its last chunk alone, and a shared
    // VM's stolen time makes that common (paired runs: +1.5-2.5 points of bandwidth).
    const int64_t decode_rows = std::min<int64_t>(rows, std::max<int64_t>(16, int64_t((256u << 10) / std::max<uint64_t>(w_row_bytes, 1))));
    const int64_t n_decode_chunks = (n_out + decode_rows - 1) / decode_rows;
    pool.parallel_for(n_decode_chunks, [&](int64_t chunk, int) {
      const int64_t r0 = chunk * decode_rows, r1 = std::min(n_out, r0 + decode_rows);
      plan.dot.rows(n_in, w.at(r0), size_t(w.nb[1]), r1 - r0, act.data(), out + r0);
    });
    return;
  }
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
