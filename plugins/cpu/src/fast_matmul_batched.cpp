// Batched MATMUL (two or more activation rows): each path is written as the two passes it makes over
// the pool, preparing the activation rows (quantizing, rounding or packing panels) and multiplying
// chunks of weight rows, so that several independent matmuls (a mixture-of-experts op's experts)
// share two passes instead of paying two each: a batch of 16 gives each of 8 experts about four
// rows, and 48 pool passes per layer cost more than the experts' arithmetic.
//
// Paths, first that applies:
// - one row: the decode kernel (Kernels rows);
// - token panels (Kernels::q*_panels) from panel_min_tokens rows: 4, 8 or 16 tokens across the
//   vector lanes (kernels_avx512_panel.cpp);
// - float GEMM (Kernels::float_gemm) from gemm_min_tokens rows, for tables whose FMA units outrun
//   their int8 dot products;
// - integer tiles: one weight row x up to kMaxTile tokens.
// A batch-invariant table (Kernels::tiles_only) takes the tiles for every matmul, one row included.
#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

#include "fast_internal.h"
#include "kernels_dequant.h"
#include "matmul_plan.h"

namespace loom::cpu {
namespace {

struct BatchedMatmul {
  int64_t n_prepare = 0, n_compute = 0;
  std::function<void(int64_t)> prepare, compute;
};

// Activation buffer `slot` of the calling thread, 64-byte aligned, reused across calls (a fresh
// allocation of a prefill's megabytes would fault its pages in every call).
uint8_t* activation_buffer(size_t slot, size_t bytes) {
  static thread_local std::vector<std::vector<uint8_t>> buffers;
  if (buffers.size() <= slot) buffers.resize(slot + 1);
  std::vector<uint8_t>& b = buffers[slot];
  if (b.size() < bytes + 64) b.resize(bytes + 64);
  return b.data() + (64 - reinterpret_cast<uintptr_t>(b.data()) % 64) % 64;
}

// The panel set for `type`, nullptr where the table has none or n_tok is below its threshold.
const PanelSet* panel_set(loom_dtype type, int64_t n_tok, const Kernels& k) {
  const PanelSet* set = type == LOOM_DTYPE_Q4_0   ? &k.q4_0_panels
                        : type == LOOM_DTYPE_Q5_0 ? &k.q5_0_panels
                        : type == LOOM_DTYPE_Q8_0 ? &k.q8_0_panels
                        : type == LOOM_DTYPE_Q4_K ? &k.q4_k_panels
                        : type == LOOM_DTYPE_Q6_K ? &k.q6_k_panels
                        : type == LOOM_DTYPE_Q4_1 ? &k.q4_1_panels
                        : type == LOOM_DTYPE_Q5_1 ? &k.q5_1_panels
                        : type == LOOM_DTYPE_IQ4_NL ? &k.iq4_nl_panels
                        : type == LOOM_DTYPE_Q5_K ? &k.q5_k_panels
                        : type == LOOM_DTYPE_IQ4_XS ? &k.iq4_xs_panels
                                                  : nullptr;
  if (set == nullptr || k.panel_min_tokens <= 0 || n_tok < k.panel_min_tokens) return nullptr;
  for (const PanelKernels& p : set->widths)
    if (p.dot != nullptr) return set;
  return nullptr;
}

// One panel of a batch: its kernels, its first token and where it starts in the panel buffer.
struct Panel {
  const PanelKernels* kernels;
  int64_t first_token;
  size_t offset;
};

// A batch's panels: the widest while at least that many tokens are left, then the narrowest that
// holds the rest.
std::vector<Panel> pack_panels(const PanelSet& set, int64_t n_tok, int64_t n_in) {
  const PanelKernels* widest = nullptr;
  for (const PanelKernels& p : set.widths)
    if (p.dot != nullptr) widest = &p;
  std::vector<Panel> panels;
  size_t offset = 0;
  for (int64_t t = 0; t < n_tok;) {
    const int64_t left = n_tok - t;
    const PanelKernels* kernels = widest;
    if (left < widest->tokens)
      for (const PanelKernels& p : set.widths)
        if (p.dot != nullptr && p.tokens >= left) {
          kernels = &p;
          break;
        }
    panels.push_back({kernels, t, offset});
    offset += (kernels->bytes(n_in) + 63) / 64 * 64;
    t += kernels->tokens;
  }
  return panels;
}

bool plain_output_rows(const Tensor& dst) { return dst.nb[0] == sizeof(float) && dst.ne[2] == 1 && dst.ne[3] == 1; }

// One activation row (in a mixture-of-experts op, an expert only one token chose): the decode
// kernel, quantizing the row once, in the same two passes as the op's other experts. Alone in a
// pass of its own, each such expert cost a pool start and an uneven finish.
bool row_job(const OpArgs& a, int n_threads, const Kernels& k, size_t slot, BatchedMatmul& job) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  if (x.n_rows() != 1 || dst.nb[0] != sizeof(float)) return false;
  const MatmulPlan plan = plan_for(w.dtype, n_in, k);
  const size_t bytes = plan.dot.rows_quantize ? size_t(kRowsActivationBytes(n_in)) : plan.act_row_bytes;
  uint8_t* const act = activation_buffer(slot, bytes);
  job.n_prepare = 1;
  job.prepare = [=, &k](int64_t) { quantize_activation(plan, plan.dot.rows_quantize, k, x.frow(0), act, n_in); };
  // Chunks as the decode path sizes them (fast_matmul.cpp).
  const uint64_t w_row_bytes = std::max<uint64_t>(row_bytes(w.dtype, n_in), 1);
  const int64_t rows = std::min<int64_t>(chunk_size(n_out, n_threads, 4), std::max<int64_t>(16, int64_t((256u << 10) / w_row_bytes)));
  job.n_compute = (n_out + rows - 1) / rows;
  job.compute = [=](int64_t chunk) {
    const int64_t r0 = chunk * rows, r1 = std::min(n_out, r0 + rows);
    plan.dot.rows(n_in, w.at(r0), size_t(w.nb[1]), r1 - r0, act, dst.frow(0) + r0);
  };
  return true;
}

// Token panels: the tokens are packed into panels, then each chunk of weight rows
// (sized to stay in L2) meets every panel. Lanes past the last token are zero and dropped.
bool panel_job(const OpArgs& a, int n_threads, const Kernels& k, size_t slot, BatchedMatmul& job) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const PanelSet* set = panel_set(w.dtype, n_tok, k);
  if (set == nullptr || n_in % 32 != 0 || !plain_output_rows(dst)) return false;

  const std::vector<Panel> panels = pack_panels(*set, n_tok, n_in);
  const Panel& last = panels.back();
  uint8_t* const buffer = activation_buffer(slot, last.offset + last.kernels->bytes(n_in));
  // Each panel quantized in parts of whole blocks, so that a batch of one or two panels keeps
  // every thread busy (a 16-token panel of 1024 values took one thread about 15 us while the
  // others waited, a quarter of a 1024 x 256 matmul).
  const int64_t unit = last.kernels->block_values, n_blocks = n_in / unit;
  const int64_t parts = std::clamp<int64_t>(2 * n_threads / int64_t(panels.size()), 1, n_blocks);
  const int64_t blocks_per_part = (n_blocks + parts - 1) / parts;
  job.n_prepare = int64_t(panels.size()) * parts;
  job.prepare = [=, &k](int64_t task) {
    const Panel& panel = panels[size_t(task / parts)];
    const int64_t b0 = task % parts * blocks_per_part, b1 = std::min(n_blocks, b0 + blocks_per_part);
    if (b0 >= b1) return;
    const int n_valid = int(std::min<int64_t>(panel.kernels->tokens, n_tok - panel.first_token));
    const float* rows[kMaxPanelTokens];
    for (int t = 0; t < n_valid; t++) rows[t] = x.frow(panel.first_token + t) + b0 * unit;
    panel.kernels->quantize(k, rows, n_valid, (b1 - b0) * unit, buffer + panel.offset + panel.kernels->bytes(b0 * unit));
  };

  const uint64_t w_row_bytes = std::max<uint64_t>(row_bytes(w.dtype, n_in), 1);
  // About 64 KiB of weights per chunk, in the kernels' groups of four rows, so that the chunk is
  // read from L2 by every panel after the first; one panel reads it once, and takes 256 KiB (a
  // mixture-of-experts batch of 16, one panel per expert: chunks of 64 KiB ran 3-7% slower, each
  // chunk's first rows waiting on memory before the kernel's prefetching reaches ahead).
  const uint64_t chunk_bytes = (panels.size() == 1 ? 256u : 64u) << 10;
  const int64_t l2_rows = std::max<int64_t>(4, int64_t(chunk_bytes / w_row_bytes) / 4 * 4);
  const int64_t rows = std::min<int64_t>(l2_rows, chunk_size(n_out, n_threads, 4));
  job.n_compute = (n_out + rows - 1) / rows;
  job.compute = [=](int64_t chunk) {
    static thread_local std::vector<float> sums;
    const int64_t r0 = chunk * rows, n_rows = std::min(n_out, r0 + rows) - r0;
    for (const Panel& panel : panels) {
      const int64_t lanes = panel.kernels->tokens;
      sums.resize(size_t(n_rows * lanes));
      panel.kernels->dot(n_in, w.at(r0), size_t(w.nb[1]), n_rows, buffer + panel.offset, sums.data());
      const int n_valid = int(std::min<int64_t>(lanes, n_tok - panel.first_token));
      for (int t = 0; t < n_valid; t++) {
        float* d = dst.frow(panel.first_token + t) + r0;
        for (int64_t r = 0; r < n_rows; r++) d[r] = sums[size_t(r * lanes + t)];
      }
    }
  };
  return true;
}

// Float GEMM (Kernels::float_gemm): each chunk of weight rows is decoded to floats once (sized to
// stay in L2) and multiplied with every activation row.
//
// Batch invariance: the activations first take the int8 rounding the one-row kernels give them, so a
// sequence's logits are the same (to float summation order) whether it ran alone or in a batch of 16:
// the integer kernels' block sums are exact, and so, to rounding, are these float ones.
//
// Types without a vector decoder use the reference one (dequantize_row), a few ns per value: worth it
// only when many tokens share each decoded row, as in prefill.
constexpr int64_t kReferenceDecodeMinTokens = 64;
// Tokens per pass of a large batch's GEMM (see float_gemm_job).
constexpr int64_t kTokenBlock = 128;

// The matmuls of one pass (fast_matmul_batched's ops), to ask whether any of them writes a tensor.
struct Pass {
  const OpArgs* const* ops;
  int n_ops;
  bool writes(const Tensor& t) const {
    for (int j = 0; j < n_ops; j++)
      if (overlap(ops[j]->dst, t)) return true;
    return false;
  }
};

// Float activations the GEMM can read where they lie: F32 rows of one stride, which no matmul of the
// pass writes (their copy was 2.5% of an embedding model's time, a row copied per matmul per layer).
// The pass is asked last, only for rows that could be read in place.
bool rows_in_place(const Tensor& x, const Pass& pass) {
  return x.dtype == LOOM_DTYPE_F32 && x.nb[0] == sizeof(float) && x.nb[1] % sizeof(float) == 0 && x.ne[2] == 1 && x.ne[3] == 1 &&
         !pass.writes(x);
}

bool float_gemm_job(const OpArgs& a, int n_threads, const Kernels& k, size_t slot, const Pass& pass, BatchedMatmul& job) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const bool float_weights = w.dtype == LOOM_DTYPE_F32 || w.dtype == LOOM_DTYPE_F16 || w.dtype == LOOM_DTYPE_BF16;
  const bool own_gemm = k.float_gemm.gemm != nullptr && n_tok >= k.gemm_min_tokens;
  const FloatGemm& gemm_set = own_gemm ? k.float_gemm : k.float_weight_gemm;
  if (!own_gemm && !(float_weights && gemm_set.gemm != nullptr && n_tok >= k.float_weight_gemm_min_tokens)) return false;
  if (n_in % 8 != 0) return false;
  // Packed outer products for float weights only: a Q4_K model's 512-token prefill on a 2-core AVX2
  // EPYC ran at the same speed either way (the rows' decoding weighs as much), and its prefill keeps
  // the summation order of its shorter batches.
  const bool packed_kernel = gemm_set.packed_gemm != nullptr && n_tok >= gemm_set.packed_min_tokens && float_weights;
  const auto gemm = packed_kernel ? gemm_set.packed_gemm : gemm_set.gemm;
  const RowDecodeFn fast_decode = gemm_set.decoder(w.dtype);
  if (fast_decode == nullptr && n_tok < kReferenceDecodeMinTokens) return false;
  const MatmulPlan plan = plan_for(w.dtype, n_in, k);
  // Activations in the table's usual format for the type (not a kernel-specific layout the rounding
  // above would not reproduce).
  if (!plain_output_rows(dst) || dst.nb[1] % sizeof(float) != 0 || plan.dot.rows_quantize != nullptr || plan.dot.tile_quantize != nullptr)
    return false;

  const float* activations = nullptr;
  int64_t x_stride = n_in;
  if (plan.format == ActFormat::f32 && rows_in_place(x, pass)) {
    activations = x.frow(0);
    x_stride = int64_t(x.nb[1] / sizeof(float));
  } else {
    auto* const rounded = reinterpret_cast<float*>(activation_buffer(slot, size_t(n_tok * n_in) * sizeof(float)));
    job.n_prepare = n_tok;
    job.prepare = [=, &k](int64_t t) { round_like_integer_kernels(plan, k, x.frow(t), rounded + t * n_in, n_in); };
    activations = rounded;
  }

  const bool many_tokens = n_tok >= kTokenBlock * 2;
  const auto pack = packed_kernel ? gemm_set.pack : nullptr;
  const auto packed_floats = gemm_set.packed_floats;
  int64_t rows = 0, token_block = 0;
  if (pack != nullptr) {
    // A packed kernel keeps one block of k of its panels in L2 (4 panels: 128 KiB) and walks the
    // tokens past them, so a chunk can be wide, and wide chunks read the activations fewer times
    // (each chunk streams all of them). Up to 4 panels per chunk, fewer where that splits the chunks
    // evenly over the threads; token blocks of 252 rows (21 register blocks, 252 KiB per block of k).
    const int64_t panel = gemm_set.packed_panel, panels = (n_out + panel - 1) / panel;
    int64_t per_chunk = std::min<int64_t>(4, panels);
    for (int64_t p = per_chunk; p >= 1; p--) {
      const int64_t chunks = (panels + p - 1) / p;
      if (chunks % n_threads == 0 || chunks >= 8 * n_threads) {
        per_chunk = p;
        break;
      }
    }
    rows = per_chunk * panel;
    token_block = many_tokens ? 252 : n_tok;
  } else {
    // About 64 KiB of decoded rows per chunk, a multiple of the kernel's 3-row blocks. Past a few
    // hundred tokens the activations, not the weights, are what streams from memory (every chunk reads
    // all of them): chunks take 512 KiB of rows and walk the tokens in blocks that stay in L2 beside
    // them, so a vision encoder's 4096 x 1152 activations are read 8 times less often.
    const int64_t l2_rows = std::max<int64_t>(3, int64_t(((many_tokens ? 512u : 64u) << 10) / (uint64_t(n_in) * sizeof(float))) / 3 * 3);
    rows = std::min<int64_t>(l2_rows, std::max<int64_t>(3, chunk_size(n_out, n_threads, 3)));
    // A block of activations takes at most 1 MiB of L2 (tokens of 4304 values: 60 at a time).
    const int64_t fit = std::clamp<int64_t>(int64_t((1u << 20) / (uint64_t(n_in) * sizeof(float))) / 4 * 4, 16, kTokenBlock);
    token_block = many_tokens ? fit : n_tok;
  }
  // A small matrix (an encoder's 384 x 384) packs whole into each thread's L2: the threads then split
  // the tokens, each packing every row once per call (kept across its chunks), instead of splitting the
  // rows, where each would stream all the activations (both threads reading the same 3 MB: 1.45x on 2
  // threads against 1.75x for the wider matrices).
  if (pack != nullptr && many_tokens && uint64_t(n_out) * uint64_t(n_in) * sizeof(float) <= (1u << 20)) {
    static std::atomic<uint64_t> next_call{1};
    const uint64_t call = next_call++;
    const int64_t per_chunk = std::max<int64_t>(token_block, (n_tok + 4 * n_threads - 1) / (4 * n_threads));
    job.n_compute = (n_tok + per_chunk - 1) / per_chunk;
    job.compute = [=](int64_t chunk) {
      static thread_local std::vector<float> decoded, packed;
      static thread_local uint64_t packed_call = 0;
      if (packed_call != call) {  // this thread's first chunk of the call
        decoded.resize(size_t(n_out * n_in));
        for (int64_t r = 0; r < n_out; r++) {
          if (fast_decode) fast_decode(w.at(r), decoded.data() + r * n_in, n_in);
          else dequantize_row(w.dtype, w.at(r), decoded.data() + r * n_in, n_in);
        }
        packed.resize(packed_floats(n_in, n_out));
        pack(decoded.data(), n_in, n_in, n_out, packed.data());
        packed_call = call;
      }
      const int64_t dst_stride = int64_t(dst.nb[1] / sizeof(float));
      const int64_t t_end = std::min(n_tok, (chunk + 1) * per_chunk);
      for (int64_t t0 = chunk * per_chunk; t0 < t_end; t0 += token_block)
        gemm(n_in, packed.data(), n_in, n_out, activations + t0 * x_stride, x_stride, std::min(token_block, t_end - t0),
             reinterpret_cast<float*>(dst.data) + t0 * dst_stride, dst_stride);
    };
    return true;
  }
  job.n_compute = (n_out + rows - 1) / rows;
  job.compute = [=](int64_t chunk) {
    static thread_local std::vector<float> decoded, packed;
    const int64_t r0 = chunk * rows, n_rows = std::min(n_out, r0 + rows) - r0;
    decoded.resize(size_t(n_rows * n_in));
    for (int64_t r = 0; r < n_rows; r++) {
      if (fast_decode) fast_decode(w.at(r0 + r), decoded.data() + r * n_in, n_in);
      else dequantize_row(w.dtype, w.at(r0 + r), decoded.data() + r * n_in, n_in);
    }
    const float* weights = decoded.data();
    if (pack != nullptr) {  // the kernel's panels, once for every block of tokens
      packed.resize(packed_floats(n_in, n_rows));
      pack(decoded.data(), n_in, n_in, n_rows, packed.data());
      weights = packed.data();
    }
    const int64_t dst_stride = int64_t(dst.nb[1] / sizeof(float));
    for (int64_t t0 = 0; t0 < n_tok; t0 += token_block)
      gemm(n_in, weights, n_in, n_rows, activations + t0 * x_stride, x_stride, std::min(token_block, n_tok - t0),
           reinterpret_cast<float*>(dst.data) + t0 * dst_stride + r0, dst_stride);
  };
  return true;
}

// Rows ahead that a streaming tile pass asks for (as the decode kernels' rows_dot does).
constexpr int64_t kPrefetchRows = 4;

// Integer tiles: each weight block is unpacked once per tile of kMaxTile tokens, and the chunk (sized
// to stay in L2) is re-read from cache, not memory, for the next tile.
void tile_job(const OpArgs& a, int n_threads, const Kernels& k, size_t slot, BatchedMatmul& job) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const MatmulPlan plan = plan_for(w.dtype, n_in, k);

  // Activations: one row per token, `stride` bytes apart, in the format the kernel asks for: its own
  // layout when it brings a quantizer for this path, else the weight type's usual format.
  const RowsQuantizeFn own_layout = plan.dot.tile_quantize;
  const size_t row_bytes_needed = own_layout ? size_t(kRowsActivationBytes(n_in)) : plan.act_row_bytes;
  const size_t stride = (row_bytes_needed + 63) / 64 * 64;
  uint8_t* const act = activation_buffer(slot, stride * size_t(n_tok));
  job.n_prepare = n_tok;
  job.prepare = [=, &k](int64_t t) { quantize_activation(plan, own_layout, k, x.frow(t), act + size_t(t) * stride, n_in); };

  // Rows per chunk: about 64 KiB of weights, but small enough that every thread gets several chunks.
  const uint64_t w_row_bytes = row_bytes(w.dtype, n_in);
  const int64_t l2_rows = std::max<int64_t>(1, int64_t((64u << 10) / std::max<uint64_t>(w_row_bytes, 1)));
  const int64_t rows = std::min<int64_t>(chunk_size(n_out, n_threads, 4), std::max<int64_t>(l2_rows, 4));
  job.n_compute = (n_out + rows - 1) / rows;
  job.compute = [=](int64_t chunk) {
    const int64_t r0 = chunk * rows, r1 = std::min(n_out, r0 + rows);
    float out[kMaxTile];
    // One tile's pass streams the rows from memory, as decode does: ask for them a few rows ahead
    // (the hardware prefetcher stops at 4 KiB pages; see rows_dot).
    const bool stream_rows = n_tok <= kMaxTile;
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxTile) {
      const int n_x = int(std::min<int64_t>(kMaxTile, n_tok - t0));
      const uint8_t* xt = act + size_t(t0) * stride;
      for (int64_t r = r0; r < r1; r++) {
        if (stream_rows && r + kPrefetchRows < r1)
          for (uint64_t off = 0; off < w_row_bytes; off += 64) __builtin_prefetch(w.at(r + kPrefetchRows) + off, 0, 3);
        plan.dot.tile(n_in, w.at(r), xt, stride, n_x, out);
        for (int j = 0; j < n_x; j++) dst.frow(t0 + j)[r] = out[j];
      }
    }
  };
}

BatchedMatmul make_job(const OpArgs& a, int n_threads, const Kernels& k, size_t slot, const Pass& pass) {
  BatchedMatmul job;
  if (k.tiles_only) {  // batch invariance (Kernels::tiles_only)
    tile_job(a, n_threads, k, slot, job);
    return job;
  }
  if (!row_job(a, n_threads, k, slot, job) && !panel_job(a, n_threads, k, slot, job) &&
      !float_gemm_job(a, n_threads, k, slot, pass, job))
    tile_job(a, n_threads, k, slot, job);
  return job;
}

// Runs every job's prepare tasks in one pass over the pool, then every compute task in a second.
void run_jobs(std::vector<BatchedMatmul>& jobs, ThreadPool& pool) {
  std::vector<int64_t> first(jobs.size() + 1);
  auto pass = [&](int64_t BatchedMatmul::*count, std::function<void(int64_t)> BatchedMatmul::*task) {
    for (size_t j = 0; j < jobs.size(); j++) first[j + 1] = first[j] + jobs[j].*count;
    pool.parallel_for(first.back(), [&](int64_t i, int) {
      const size_t j = size_t(std::upper_bound(first.begin(), first.end(), i) - first.begin()) - 1;
      (jobs[j].*task)(i - first[j]);
    });
  };
  pass(&BatchedMatmul::n_prepare, &BatchedMatmul::prepare);
  pass(&BatchedMatmul::n_compute, &BatchedMatmul::compute);
}

}  // namespace

void fast_matmul_batched(const OpArgs* const* ops, int n_ops, ThreadPool& pool, const Kernels& k) {
  std::vector<BatchedMatmul> jobs;
  jobs.reserve(size_t(n_ops));
  const Pass pass{ops, n_ops};
  for (int i = 0; i < n_ops; i++) jobs.push_back(make_job(*ops[i], pool.size(), k, size_t(i), pass));
  run_jobs(jobs, pool);
}

}  // namespace loom::cpu
