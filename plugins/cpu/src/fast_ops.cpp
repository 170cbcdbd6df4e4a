// The fast layer's dispatcher and its row-wise ops. Each op splits its rows across the persistent
// pool; the per-row loops are simple enough for the compiler to vectorise.
#include "fast_ops.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "fast_internal.h"
#include "encoder_ops.h"
#include "lora_ops.h"
#include "recurrent_ops.h"
#include "reference_ops.h"

namespace loom::cpu {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// The kernel table for a "simd" setting: "auto" picks the best the CPU runs; naming a level asks
// for exactly that one (conformance runs each), and one this CPU or build lacks is an error.
const Kernels* select_kernels(const std::string& simd) {
  const Kernels* avx512 = cpu_has_avx512_vnni() ? avx512_kernels() : nullptr;
  const Kernels* avx2 = cpu_has_avx2() ? avx2_kernels() : nullptr;
  const Kernels* chosen = nullptr;
  if (simd == "auto") chosen = avx512 ? avx512 : avx2 ? avx2 : &scalar_kernels();
  else if (simd == "avx512") chosen = avx512;
  else if (simd == "avx2") chosen = avx2;
  else if (simd == "scalar") chosen = &scalar_kernels();
  else throw std::invalid_argument("config_json: \"simd\" must be \"auto\", \"avx512\", \"avx2\" or \"scalar\", got \"" + simd + "\"");
  if (chosen == nullptr) throw std::invalid_argument("config_json: \"simd\": \"" + simd + "\" is not supported by this CPU or build");
  return chosen;
}

// fn(first_row, end_row) over the op's rows, in chunks shared by the pool.
template <typename F>
void for_rows(ThreadPool& pool, int64_t n_rows, int64_t row_elems, F&& fn) {
  // Keep chunks >= ~16K elements so small ops do not pay thread hand-off for nothing.
  const int64_t min_chunk = std::max<int64_t>(1, 16384 / std::max<int64_t>(row_elems, 1));
  const int64_t chunk = chunk_size(n_rows, pool.size(), min_chunk);
  pool.parallel_for((n_rows + chunk - 1) / chunk, [&](int64_t c, int) { fn(c * chunk, std::min(n_rows, (c + 1) * chunk)); });
}

void get_rows(const OpArgs& a, ThreadPool& pool) {
  const Tensor &table = a.src[0], &ids = a.src[1], &dst = a.dst;
  for (int64_t i = 0; i < ids.ne[0]; i++) checked_index(ids, i, table.ne[1], "GET_ROWS: row id");
  for_rows(pool, ids.ne[0], table.ne[0], [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; i++)
      dequantize_row(table.dtype, table.at(reinterpret_cast<const int32_t*>(ids.data)[i]), dst.frow(i), table.ne[0]);
  });
}

void binary(const OpArgs& a, ThreadPool& pool, bool is_add) {
  const Tensor &x = a.src[0], &y = a.src[1], &dst = a.dst;
  const bool broadcast = y.n_rows() == 1;
  const int64_t n = x.ne[0];
  for_rows(pool, x.n_rows(), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* __restrict xr = x.frow(r);
      const float* __restrict yr = y.frow(broadcast ? 0 : r);
      float* out = dst.frow(r);
      if (is_add) for (int64_t i = 0; i < n; i++) out[i] = xr[i] + yr[i];
      else for (int64_t i = 0; i < n; i++) out[i] = xr[i] * yr[i];
    }
  });
}

void scale(const OpArgs& a, ThreadPool& pool) {
  const float s = a.params.scale;
  for_rows(pool, a.src[0].n_rows(), a.src[0].ne[0], [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* x = a.src[0].frow(r);
      float* out = a.dst.frow(r);
      for (int64_t i = 0; i < a.src[0].ne[0]; i++) out[i] = x[i] * s;
    }
  });
}

void rms_norm(const OpArgs& a, ThreadPool& pool) {
  const Tensor &x = a.src[0], &w = a.src[1];
  const int64_t n = x.ne[0];
  for_rows(pool, x.n_rows(), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = x.frow(r);
      float* out = a.dst.frow(r);
      float sum_sq[8] = {};  // 8 partial sums: vectorisable and more accurate than one chain
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) sum_sq[l] += xr[i + l] * xr[i + l];
      double total = 0.0;
      for (float v : sum_sq) total += v;
      for (; i < n; i++) total += double(xr[i]) * xr[i];
      const float inv_rms = float(1.0 / std::sqrt(total / double(n) + double(a.params.eps)));
      if (w.present()) {
        const float* wr = w.frow(0);
        for (int64_t j = 0; j < n; j++) out[j] = xr[j] * inv_rms * wr[j];
      } else {
        for (int64_t j = 0; j < n; j++) out[j] = xr[j] * inv_rms;
      }
    }
  });
}

// LAYER_NORM as rms_norm: 8 partial sums per pass (vectorisable; the reference's one double chain
// was latency-bound, 2.4% of an embedding model's time), combined in double.
void layer_norm_rows(const OpArgs& a, ThreadPool& pool) {
  const Tensor &x = a.src[0], &w = a.src[1], &b = a.src[2];
  const int64_t n = x.ne[0];
  const float* weight = w.present() ? w.frow(0) : nullptr;
  const float* bias = b.present() ? b.frow(0) : nullptr;
  for_rows(pool, x.n_rows(), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = x.frow(r);
      float* out = a.dst.frow(r);
      float partial[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) partial[l] += xr[i + l];
      double total = 0.0;
      for (float v : partial) total += v;
      for (; i < n; i++) total += xr[i];
      const float mean = float(total / double(n));
      float partial_sq[8] = {};
      for (i = 0; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) partial_sq[l] += (xr[i + l] - mean) * (xr[i + l] - mean);
      double total_sq = 0.0;
      for (float v : partial_sq) total_sq += v;
      for (; i < n; i++) total_sq += double(xr[i] - mean) * (xr[i] - mean);
      const float inv_std = float(1.0 / std::sqrt(total_sq / double(n) + double(a.params.eps)));
      for (int64_t j = 0; j < n; j++) {
        float v = (xr[j] - mean) * inv_std;
        if (weight != nullptr) v *= weight[j];
        if (bias != nullptr) v += bias[j];
        out[j] = v;
      }
    }
  });
}

// cos/sin of one position's rotation angles, remembered per thread: decode rotates q and k of every
// layer at the same position, and computing the angles (a pow, a cos and a sin per pair) cost more
// than rotating. A few entries cover models that mix two frequency bases (Gemma 3's local/global).
// Frequency factors are compared by value: a buffer freed and reallocated at the same address may
// hold others.
const float* rope_angles(const OpParams& p, const RopePositions& pos, const std::vector<float>& factors) {
  struct Entry {
    RopePositions pos{{-1, -1, -1, -1}};
    float freq_base = 0, freq_scale = 0, yarn_ext = 0, yarn_low = 0, yarn_high = 0;
    uint32_t n_dims = 0;
    bool mrope = false, mrope_interleaved = false;
    int32_t sections[4] = {0, 0, 0, 0};
    std::vector<float> factors;
    std::vector<float> cos_sin;
  };
  static thread_local Entry entries[4];
  static thread_local int next = 0;
  for (Entry& e : entries) {
    if (e.pos == pos && e.freq_base == p.freq_base && e.freq_scale == p.freq_scale && e.n_dims == p.n_dims &&
        e.yarn_ext == p.yarn_ext_factor && e.yarn_low == p.yarn_corr_low && e.yarn_high == p.yarn_corr_high &&
        e.mrope == p.mrope && e.mrope_interleaved == p.mrope_interleaved && std::equal(e.sections, e.sections + 4, p.sections) && e.factors == factors) {
      return e.cos_sin.data();
    }
  }
  Entry& e = entries[next];
  next = (next + 1) % 4;
  e.pos = pos, e.freq_base = p.freq_base, e.freq_scale = p.freq_scale, e.n_dims = p.n_dims, e.factors = factors;
  e.mrope = p.mrope, e.mrope_interleaved = p.mrope_interleaved;
  std::copy(p.sections, p.sections + 4, e.sections);
  e.yarn_ext = p.yarn_ext_factor, e.yarn_low = p.yarn_corr_low, e.yarn_high = p.yarn_corr_high;
  e.cos_sin.resize(p.n_dims / 2 * 2);
  rope_cos_sin(p, pos, factors.empty() ? nullptr : factors.data(), e.cos_sin.data(), e.cos_sin.data() + p.n_dims / 2);
  return e.cos_sin.data();
}

void rope(const OpArgs& a, ThreadPool& pool) {
  const Tensor &x = a.src[0], &dst = a.dst;
  const int64_t head_dim = x.ne[0], n_heads = x.ne[1], n_tok = x.ne[2], half = a.params.n_dims / 2;
  const bool neox = a.params.rope_mode == LOOM_ROPE_NEOX;
  const std::vector<float> factors = rope_freq_factors(a);
  for_rows(pool, n_tok, head_dim * n_heads, [&](int64_t t0, int64_t t1) {
    std::vector<float> row(static_cast<size_t>(head_dim));
    for (int64_t t = t0; t < t1; t++) {
      const float* c = rope_angles(a.params, rope_positions(a, t), factors);
      const float* s = c + half;
      for (int64_t h = 0; h < n_heads; h++) {
        const float* in = reinterpret_cast<const float*>(x.at(h, t));
        float* out = reinterpret_cast<float*>(dst.at(h, t));
        std::copy(in, in + head_dim, row.begin());  // dst may alias x
        if (neox) {
          for (int64_t i = 0; i < half; i++) {
            out[i] = row[i] * c[i] - row[i + half] * s[i];
            out[i + half] = row[i] * s[i] + row[i + half] * c[i];
          }
        } else {
          for (int64_t i = 0; i < half; i++) {
            out[2 * i] = row[2 * i] * c[i] - row[2 * i + 1] * s[i];
            out[2 * i + 1] = row[2 * i] * s[i] + row[2 * i + 1] * c[i];
          }
        }
        for (int64_t i = 2 * half; i < head_dim; i++) out[i] = row[i];
      }
    }
  });
}

void glu(const OpArgs& a, ThreadPool& pool, const Kernels& k, bool gated) {
  const loom_activation act = a.params.activation;
  const int64_t n = a.src[0].ne[0];
  for_rows(pool, a.src[0].n_rows(), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* g = a.src[0].frow(r);
      float* out = a.dst.frow(r);
      if (k.activation_row(act, g, gated ? a.src[1].frow(r) : nullptr, out, n)) continue;
      if (gated) {
        const float* u = a.src[1].frow(r);
        for (int64_t i = 0; i < n; i++) out[i] = glu_value(act, g[i], u[i]);
      } else {
        for (int64_t i = 0; i < n; i++) out[i] = activation_value(act, g[i]);
      }
    }
  });
}

void copy(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &src = a.src[0], &dst = a.dst;
  const int64_t n = src.ne[0];
  for_rows(pool, src.n_rows(), n, [&](int64_t r0, int64_t r1) {
    std::vector<float> tmp(static_cast<size_t>(n));  // [ne0] row widened to F32
    for (int64_t r = r0; r < r1; r++) {
      const uint8_t* in = src.row(r);
      uint8_t* out = dst.row(r);
      if (src.dtype == dst.dtype) {
        std::memmove(out, in, size_t(row_bytes(src.dtype, n)));
        continue;
      }
      if (src.dtype == LOOM_DTYPE_F16) k.f16_to_f32(reinterpret_cast<const uint16_t*>(in), tmp.data(), n);
      else dequantize_row(src.dtype, in, tmp.data(), n);
      if (dst.dtype == LOOM_DTYPE_F32) std::copy(tmp.begin(), tmp.end(), reinterpret_cast<float*>(out));
      else if (dst.dtype == LOOM_DTYPE_F16) k.f32_to_f16(tmp.data(), reinterpret_cast<uint16_t*>(out), n);
      else
        for (int64_t i = 0; i < n; i++) reinterpret_cast<uint16_t*>(out)[i] = float_to_bf16(tmp[size_t(i)]);
    }
  });
}

void softmax(const OpArgs& a, ThreadPool& pool) {
  const int64_t n = a.src[0].ne[0];
  for_rows(pool, a.src[0].n_rows(), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* x = a.src[0].frow(r);
      float* out = a.dst.frow(r);
      const float max = *std::max_element(x, x + n);
      double sum = 0.0;
      for (int64_t i = 0; i < n; i++) sum += out[i] = std::exp(x[i] - max);
      const float inv = float(1.0 / sum);
      for (int64_t i = 0; i < n; i++) out[i] *= inv;
    }
  });
}

TaskRunner on_pool(ThreadPool& pool) {
  return [&pool](int64_t n_tasks, const std::function<void(int64_t)>& fn) {
    pool.parallel_for(n_tasks, [&](int64_t t, int) { fn(t); });
  };
}

}  // namespace

FastOps::FastOps(int n_threads, const std::string& simd, bool batch_invariant)
    : pool_(std::make_unique<ThreadPool>(n_threads)), kernels_(select_kernels(simd)) {
  if (batch_invariant) {
    invariant_table_ = std::make_unique<Kernels>(*kernels_);
    invariant_table_->tiles_only = true;
    kernels_ = invariant_table_.get();
  }
}

FastOps::~FastOps() = default;

int FastOps::n_threads() const { return pool_->size(); }
const char* FastOps::isa_name() const { return kernels_->name; }
bool FastOps::batch_invariant() const { return kernels_->tiles_only; }

int FastOps::run_group(const OpArgs* const* ops, int n) {
  if (ops[0]->type == LOOM_OP_MOE_MATMUL) {
    int members = 1;
    while (members < std::min(n, kMaxGroup) &&
           std::all_of(ops, ops + members, [&](const OpArgs* member) { return joins_moe_group(*member, *ops[members]); }))
      members++;
    std::lock_guard<std::mutex> lock(mutex_);
    fast_moe_matmul_group(ops, members, *pool_, *kernels_, moe_counters_);
    return members;
  }
  int members = 1;
  while (members < std::min(n, kMaxGroup) && joins_decode_group(ops, members, *ops[members])) members++;
  if (members == 1) {
    run(*ops[0]);
    return 1;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  fast_matmul_decode_group(ops, members, *pool_, *kernels_);
  return members;
}

void FastOps::run(const OpArgs& a) {
  std::lock_guard<std::mutex> lock(mutex_);
  ThreadPool& pool = *pool_;
  switch (a.type) {
    case LOOM_OP_GET_ROWS: return get_rows(a, pool);
    case LOOM_OP_MATMUL: return fast_matmul(a, pool, *kernels_);
    case LOOM_OP_ADD: return binary(a, pool, true);
    case LOOM_OP_MUL: return binary(a, pool, false);
    case LOOM_OP_SCALE: return scale(a, pool);
    case LOOM_OP_RMS_NORM: return rms_norm(a, pool);
    case LOOM_OP_ROPE: return rope(a, pool);
    case LOOM_OP_GLU: return glu(a, pool, *kernels_, true);
    case LOOM_OP_UNARY: return glu(a, pool, *kernels_, false);
    case LOOM_OP_COPY: return copy(a, pool, *kernels_);
    case LOOM_OP_SOFTMAX: return softmax(a, pool);
    case LOOM_OP_STORE_KV: return fast_store_kv(a, pool, *kernels_);
    case LOOM_OP_PAGED_ATTENTION: return fast_paged_attention(a, pool, *kernels_);
    case LOOM_OP_MOE_ROUTE:
      return pool.parallel_for(a.src[0].ne[1], [&](int64_t t, int) { moe_route_rows(a, t, t + 1); });
    case LOOM_OP_MOE_MATMUL: return fast_moe_matmul(a, pool, *kernels_, moe_counters_);
    case LOOM_OP_MOE_SUM: return pool.parallel_for(a.src[0].ne[2], [&](int64_t t, int) { moe_sum_rows(a, t, t + 1); });
    case LOOM_OP_SSM_CONV: return ssm_conv(a, on_pool(pool));
    case LOOM_OP_GATED_DELTA_NET: return gated_delta_net(a, on_pool(pool), {kernels_->vdot_f32, {kernels_->float_dots, kernels_->axpy_f32, kernels_->decay_add_outer}});
    case LOOM_OP_LAYER_NORM: return layer_norm_rows(a, pool);
    case LOOM_OP_ATTENTION: return fast_encoder_attention(a, pool, *kernels_);
    case LOOM_OP_PATCHES: return image_patches(a, on_pool(pool));
    case LOOM_OP_POOL_2D: return pool_2d(a, on_pool(pool));
    case LOOM_OP_CLAMP: return clamp(a, on_pool(pool));
    case LOOM_OP_LORA: return lora(a, on_pool(pool), {kernels_->vdot_f32, kernels_->axpy_f32, kernels_->axpy_f16});
    default: unsupported("op " + std::to_string(a.type) + " has no fast implementation");
  }
}

}  // namespace loom::cpu
