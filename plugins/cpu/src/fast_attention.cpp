// Fast STORE_KV and PAGED_ATTENTION. Attention runs one task per (sequence, head); each query row
// walks its visible keys in tiles with an online softmax, so no [n_keys] score buffer per row and
// one pass over K and V.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fast_internal.h"
#include "reference_ops.h"

namespace loom::cpu {
namespace {

// q · k for one cache row of any KV dtype.
float dot_kv(const Kernels& k, loom_dtype type, const uint8_t* row, const float* q, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_F32: return k.vdot_f32(reinterpret_cast<const float*>(row), q, n);
    case LOOM_DTYPE_F16: return k.vdot_f16(reinterpret_cast<const uint16_t*>(row), q, n);
    default: {
      float scale;
      std::memcpy(&scale, row, 4);
      return scale * k.vdot_i8(reinterpret_cast<const int8_t*>(row + 4), q, n);
    }
  }
}

// acc += p * v for one cache row.
void axpy_kv(const Kernels& k, loom_dtype type, float p, const uint8_t* row, float* acc, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_F32: return k.axpy_f32(p, reinterpret_cast<const float*>(row), acc, n);
    case LOOM_DTYPE_F16: return k.axpy_f16(p, reinterpret_cast<const uint16_t*>(row), acc, n);
    default: {
      float scale;
      std::memcpy(&scale, row, 4);
      return k.axpy_i8(p * scale, reinterpret_cast<const int8_t*>(row + 4), acc, n);
    }
  }
}

void store_row(const Kernels& k, const Tensor& cache, int64_t head, int64_t slot, const float* x) {
  uint8_t* row = cache.at(head, slot);
  const int64_t n = cache.ne[0];
  if (cache.dtype == LOOM_DTYPE_F32) std::memcpy(row, x, size_t(n) * 4);
  else if (cache.dtype == LOOM_DTYPE_F16) k.f32_to_f16(x, reinterpret_cast<uint16_t*>(row), n);
  else quantize_row_int8_kv(x, row, n);
}

constexpr int kKeyTile = 32;

}  // namespace

void fast_store_kv(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &kx = a.src[0], &vx = a.src[1], &slots = a.src[2], &k_cache = a.src[3], &v_cache = a.src[4];
  const int64_t n_tok = kx.ne[2];
  for (int64_t t = 0; t < n_tok; t++)  // check every slot before writing any
    if (reinterpret_cast<const int32_t*>(slots.data)[t] >= 0) checked_index(slots, t, k_cache.ne[2], "STORE_KV: slot");
  const int64_t chunk = chunk_size(n_tok, pool.size(), 16);
  pool.parallel_for((n_tok + chunk - 1) / chunk, [&](int64_t c, int) {
    for (int64_t t = c * chunk; t < std::min(n_tok, (c + 1) * chunk); t++) {
      const int64_t slot = reinterpret_cast<const int32_t*>(slots.data)[t];
      if (slot < 0) continue;
      for (int64_t h = 0; h < kx.ne[1]; h++) {
        store_row(k, k_cache, h, slot, reinterpret_cast<const float*>(kx.at(h, t)));
        store_row(k, v_cache, h, slot, reinterpret_cast<const float*>(vx.at(h, t)));
      }
    }
  });
}

void fast_paged_attention(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &q = a.src[0], &k_cache = a.src[1], &v_cache = a.src[2], &block_tables = a.src[3], &dst = a.dst;
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], group = n_heads / k_cache.ne[1];
  const int64_t block_size = a.params.block_size;
  const float scale = a.params.attn_scale, softcap = a.params.softcap;
  const std::vector<SeqInfo> seqs = read_seqs(a);  // validates every block id first

  pool.parallel_for(int64_t(seqs.size()) * n_heads, [&](int64_t task, int) {
    const int64_t s = task / n_heads, h = task % n_heads, kv_head = h / group;
    const SeqInfo& seq = seqs[size_t(s)];
    std::vector<float> acc(static_cast<size_t>(head_dim));  // [head_dim] running Σ p·v
    float scores[kKeyTile];
    for (int64_t i = 0; i < seq.n_query; i++) {
      const int64_t t = seq.first_row + i, pos = seq.ctx_len - seq.n_query + i;
      const float* qv = reinterpret_cast<const float*>(q.at(h, t));
      float running_max = -std::numeric_limits<float>::infinity(), running_sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j0 = first_visible_key(pos, a.params.sliding_window); j0 <= pos; j0 += kKeyTile) {
        const int n = int(std::min<int64_t>(kKeyTile, pos + 1 - j0));
        float tile_max = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < n; j++) {
          const int64_t slot = kv_slot(block_tables, s, j0 + j, block_size);
          float sc = dot_kv(k, k_cache.dtype, k_cache.at(kv_head, slot), qv, head_dim) * scale;
          if (softcap > 0.0f) sc = softcap * std::tanh(sc / softcap);
          scores[j] = sc;
          tile_max = std::max(tile_max, sc);
        }
        if (tile_max > running_max) {  // rescale what was accumulated under the old maximum
          const float r = std::exp(running_max - tile_max);
          running_sum *= r;
          for (float& v : acc) v *= r;
          running_max = tile_max;
        }
        for (int j = 0; j < n; j++) {
          const float p = std::exp(scores[j] - running_max);
          running_sum += p;
          axpy_kv(k, v_cache.dtype, p, v_cache.at(kv_head, kv_slot(block_tables, s, j0 + j, block_size)), acc.data(), head_dim);
        }
      }
      float* out = reinterpret_cast<float*>(dst.at(h, t));
      const float inv = 1.0f / running_sum;
      for (int64_t d = 0; d < head_dim; d++) out[d] = acc[size_t(d)] * inv;
    }
  });
}

}  // namespace loom::cpu
