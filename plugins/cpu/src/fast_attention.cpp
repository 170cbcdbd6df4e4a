// Fast STORE_KV and PAGED_ATTENTION. Each query row walks its visible keys in tiles with an online
// softmax, so no [n_keys] score buffer per row and one pass over K and V; decode rows run one task
// per (sequence, head), prefill rows in chunks that share their keys converted to f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "encoder_ops.h"
#include "fast_internal.h"
#include "reference_ops.h"

namespace loom::cpu {
namespace {

// A block-quantized cache row (Q8_0, Q4_0) decoded into this thread's scratch row.
const float* decoded_row(loom_dtype type, const uint8_t* row, int64_t n) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < size_t(n)) scratch.resize(size_t(n));
  dequantize_row(type, row, scratch.data(), n);
  return scratch.data();
}

// q · k for one cache row of any KV dtype.
float dot_kv(const Kernels& k, loom_dtype type, const uint8_t* row, const float* q, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_F32: return k.vdot_f32(reinterpret_cast<const float*>(row), q, n);
    case LOOM_DTYPE_F16: return k.vdot_f16(reinterpret_cast<const uint16_t*>(row), q, n);
    case LOOM_DTYPE_INT8_KV: {
      float scale;
      std::memcpy(&scale, row, 4);
      return scale * k.vdot_i8(reinterpret_cast<const int8_t*>(row + 4), q, n);
    }
    default: return k.vdot_f32(decoded_row(type, row, n), q, n);
  }
}

// acc += p * v for one cache row.
void axpy_kv(const Kernels& k, loom_dtype type, float p, const uint8_t* row, float* acc, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_F32: return k.axpy_f32(p, reinterpret_cast<const float*>(row), acc, n);
    case LOOM_DTYPE_F16: return k.axpy_f16(p, reinterpret_cast<const uint16_t*>(row), acc, n);
    case LOOM_DTYPE_INT8_KV: {
      float scale;
      std::memcpy(&scale, row, 4);
      return k.axpy_i8(p * scale, reinterpret_cast<const int8_t*>(row + 4), acc, n);
    }
    default: return k.axpy_f32(p, decoded_row(type, row, n), acc, n);
  }
}

void store_row(const Kernels& k, const Tensor& cache, int64_t head, int64_t slot, const float* x) {
  uint8_t* row = cache.at(head, slot);
  const int64_t n = cache.ne[0];
  if (cache.dtype == LOOM_DTYPE_F32) std::memcpy(row, x, size_t(n) * 4);
  else if (cache.dtype == LOOM_DTYPE_F16) k.f32_to_f16(x, reinterpret_cast<uint16_t*>(row), n);
  else quantize_kv_row(cache.dtype, x, row, n);
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

namespace {

// One query row against keys [first_key, last_key] with an online softmax over tiles of keys:
// out = sum_j softmax(score_j) v_j. score(j) and add_value(p, j, acc) reach key j's row. A finite
// `sink` (gpt-oss) joins the softmax as a score without a value.
template <typename Score, typename AddValue>
void attend_row(int64_t first_key, int64_t last_key, int64_t head_dim, Score score, AddValue add_value, float* acc, float* out,
                float sink) {
  float scores[kKeyTile];
  float running_max = -std::numeric_limits<float>::infinity(), running_sum = 0.0f;
  std::fill(acc, acc + head_dim, 0.0f);
  for (int64_t j0 = first_key; j0 <= last_key; j0 += kKeyTile) {
    const int n = int(std::min<int64_t>(kKeyTile, last_key + 1 - j0));
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; j++) tile_max = std::max(tile_max, scores[j] = score(j0 + j));
    if (tile_max > running_max) {  // rescale what was accumulated under the old maximum
      const float r = std::exp(running_max - tile_max);
      running_sum *= r;
      for (int64_t d = 0; d < head_dim; d++) acc[d] *= r;
      running_max = tile_max;
    }
    for (int j = 0; j < n; j++) {
      const float p = std::exp(scores[j] - running_max);
      running_sum += p;
      add_value(p, j0 + j, acc);
    }
  }
  float scale_acc = 1.0f;
  if (std::isfinite(sink)) {
    const float m = std::max(running_max, sink), r = std::exp(running_max - m);
    running_sum = running_sum * r + std::exp(sink - m);
    scale_acc = r;
  }
  const float inv = scale_acc / running_sum;
  for (int64_t d = 0; d < head_dim; d++) out[d] = acc[d] * inv;
}

// A cache row of any KV dtype as floats.
void row_to_f32(const Kernels& k, loom_dtype type, const uint8_t* row, float* out, int64_t n) {
  if (type == LOOM_DTYPE_F32) {
    std::memcpy(out, row, size_t(n) * 4);
  } else if (type == LOOM_DTYPE_F16) {
    k.f16_to_f32(reinterpret_cast<const uint16_t*>(row), out, n);
  } else if (type == LOOM_DTYPE_INT8_KV) {
    std::fill(out, out + n, 0.0f);
    axpy_kv(k, type, 1.0f, row, out, n);
  } else {
    dequantize_row(type, row, out, n);
  }
}

// Attention as matrix products (Kernels::float_dots), for every row: per tile of kScoreTile keys,
// the rows' scores S = Q Kᵀ in one product, an online softmax over the tile (vector exponentials),
// and the weighted values P V in a second product. Row by row, each (row, key) pair paid a call, a
// horizontal sum, a libm exp and a load and store of the whole accumulator: about 150 cycles per
// 512 multiply-adds, 35% of a 512-token prefill of the default model.
//
// A row's result does not depend on the rows it is computed with: its tiles are aligned to absolute
// key positions, keys it cannot see weigh exactly 0, every score is the same dot product whatever
// the product's shape, and few rows take the weighted values without transposing them
// (Kernels::weighted_values) in float_dots' own arithmetic. So a prompt prefilled in one chunk, in
// several, or decoded token by token gives bit-identical attention, which the engine's batch
// invariance needs: activations are then rounded to int8 blocks, where a last-bit difference can
// move a value by a whole step.
constexpr int64_t kScoreTile = 128;
// From this many rows x heads sharing a tile the values are transposed for float_dots.
constexpr int64_t kTransposeRows = 8;

// One query head's rows in a tiled pass: row i (position pos0 + i) reads q + i * q_stride and
// writes out + i * out_stride.
struct HeadRows {
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  float sink;  // -inf: none
};

// cache_row(j, value): key j's row in the K cache (value false) or the V cache.
template <typename CacheRow, typename KeyScore>
void attend_tiled(const Kernels& k, loom_dtype kv_type, CacheRow cache_row, int64_t head_dim, const HeadRows* heads, int64_t n_heads,
                  int64_t n, int64_t pos0, uint32_t window, int64_t non_causal_last, KeyScore key_score) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  static thread_local std::vector<float> keys, values, values_t, scores, weighted, acc, row_max, row_sum, rescale;
  // Causal rows see keys up to their own position; non-causal ones (non_causal_last >= 0) up to it.
  const int64_t first = first_visible_key(pos0, window), last = non_causal_last >= 0 ? non_causal_last : pos0 + n - 1;
  const bool transpose = n * n_heads >= kTransposeRows;
  keys.resize(size_t(kScoreTile * head_dim));
  values.resize(size_t(kScoreTile * head_dim));
  if (transpose) values_t.resize(size_t(head_dim * kScoreTile));
  scores.resize(size_t(n * kScoreTile));
  weighted.resize(size_t(n * head_dim));
  // The output may be the query's own memory, so rows accumulate apart and are written at the end.
  acc.assign(size_t(n_heads * n * head_dim), 0.0f);
  row_max.assign(size_t(n_heads * n), kMinusInf);
  row_sum.assign(size_t(n_heads * n), 0.0f);
  rescale.resize(size_t(n));
  for (int64_t t0 = first / kScoreTile * kScoreTile; t0 <= last; t0 += kScoreTile) {
    const int64_t width = std::min(kScoreTile, last + 1 - t0), padded = (width + 7) / 8 * 8;
    for (int64_t j = 0; j < padded; j++) {
      float *key_row = keys.data() + j * head_dim, *value_row = values.data() + j * head_dim;
      if (t0 + j >= first && t0 + j <= last) {
        row_to_f32(k, kv_type, cache_row(t0 + j, false), key_row, head_dim);
        row_to_f32(k, kv_type, cache_row(t0 + j, true), value_row, head_dim);
      } else {
        std::fill(key_row, key_row + head_dim, 0.0f);
        std::fill(value_row, value_row + head_dim, 0.0f);
      }
    }
    if (transpose)
      for (int64_t j = 0; j < padded; j++)
        for (int64_t d = 0; d < head_dim; d++) values_t[size_t(d * kScoreTile + j)] = values[size_t(j * head_dim + d)];
    for (int64_t hh = 0; hh < n_heads; hh++) {
      const HeadRows& h = heads[hh];
      k.float_dots(head_dim, keys.data(), head_dim, width, h.q, h.q_stride, n, scores.data(), kScoreTile);
      for (int64_t i = 0; i < n; i++) {
        float* s = scores.data() + i * kScoreTile;
        const int64_t pos = pos0 + i, lo = first_visible_key(pos, window), hi = non_causal_last >= 0 ? non_causal_last : pos;
        float tile_max = kMinusInf;
        for (int64_t j = 0; j < padded; j++) {
          s[j] = j < width && t0 + j >= lo && t0 + j <= hi ? key_score(s[j]) : kMinusInf;
          tile_max = std::max(tile_max, s[j]);
        }
        const size_t state = size_t(hh * n + i);
        const float m = std::max(row_max[state], tile_max);
        if (m == kMinusInf) {  // nothing visible to this row yet: weights 0, nothing to rescale
          std::fill(s, s + padded, 0.0f);
          rescale[size_t(i)] = 1.0f;
          continue;
        }
        rescale[size_t(i)] = std::exp(row_max[state] - m);
        row_sum[state] = row_sum[state] * rescale[size_t(i)] + k.exp_shifted(s, padded, m);
        row_max[state] = m;
      }
      if (transpose) k.float_dots(padded, values_t.data(), kScoreTile, head_dim, scores.data(), kScoreTile, n, weighted.data(), head_dim);
      else k.weighted_values(scores.data(), kScoreTile, n, padded, values.data(), head_dim, weighted.data(), head_dim);
      for (int64_t i = 0; i < n; i++) {
        float* o = acc.data() + (hh * n + i) * head_dim;
        const float r = rescale[size_t(i)], *w = weighted.data() + i * head_dim;
        for (int64_t d = 0; d < head_dim; d++) o[d] = o[d] * r + w[d];
      }
    }
  }
  for (int64_t hh = 0; hh < n_heads; hh++) {
    for (int64_t i = 0; i < n; i++) {
      const size_t state = size_t(hh * n + i);
      float scale_acc = 1.0f, sum = row_sum[state];
      if (std::isfinite(heads[hh].sink)) {  // a score without a value, as attend_row folds it in
        const float m = std::max(row_max[state], heads[hh].sink), r = std::exp(row_max[state] - m);
        sum = sum * r + std::exp(heads[hh].sink - m);
        scale_acc = r;
      }
      const float inv = scale_acc / sum, *o = acc.data() + state * size_t(head_dim);
      float* out = heads[hh].out + i * heads[hh].out_stride;
      for (int64_t d = 0; d < head_dim; d++) out[d] = o[d] * inv;
    }
  }
}

// Work items: decode rows take one (sequence, head) each and read the cache in place, or in the
// tiled pass of a large batch one (sequence, KV head) as a chunk. A prefill chunk takes kQueryChunk
// query rows of one sequence and one KV head with all the query heads that share it: its visible
// keys and values are converted to f32 once, then read by every row and head of the chunk (prefill
// read and converted each K/V row once per query row and head before).
constexpr int64_t kQueryChunk = 32;
constexpr int64_t kMinPrefillRows = 8;
struct AttentionTask {
  int64_t seq;
  int64_t head;  // query head (decode) or KV head (prefill chunk)
  int64_t row0, row1;  // query rows of the sequence, [row0, row1)
  bool chunk;
};

}  // namespace

void fast_paged_attention(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &q = a.src[0], &k_cache = a.src[1], &v_cache = a.src[2], &block_tables = a.src[3], &dst = a.dst;
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], n_kv_heads = k_cache.ne[1], group = n_heads / n_kv_heads;
  const int64_t block_size = a.params.block_size;
  const float scale = a.params.attn_scale, softcap = a.params.softcap;
  const std::vector<SeqInfo> seqs = read_seqs(a);  // validates every block id first

  auto sink_of = [&](int64_t h) {
    return a.src[5].present() ? reinterpret_cast<const float*>(a.src[5].data + uint64_t(h) * a.src[5].nb[0])[0]
                              : -std::numeric_limits<float>::infinity();
  };
  auto key_score = [&](float dot) { return softcap > 0.0f ? softcap * std::tanh(dot * scale / softcap) : dot * scale; };
  // Every row as matrix products (attend_tiled) where the table has them, the K and V caches share a
  // type and the rows are plain strided rows; else one row at a time.
  constexpr int64_t kMaxGroup = 64;
  const bool tiled = k.float_dots != nullptr && k.exp_shifted != nullptr && k.weighted_values != nullptr && head_dim % 8 == 0 &&
                     k_cache.dtype == v_cache.dtype && group <= kMaxGroup && q.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float) &&
                     q.nb[2] % sizeof(float) == 0 && dst.nb[2] % sizeof(float) == 0;

  // Decode rows in the tiled pass also go per KV head, with its query heads together, once there
  // are enough such tasks to keep the threads busy: each tile's keys and values are converted to
  // f32 once for the group instead of once per query head (synthetic qwen3moe, batch 16, four query
  // heads per KV head: attention went from 5.3 to 3.7 ms of a 22.8 ms decode step).
  int64_t n_decode_seqs = 0;
  for (const SeqInfo& seq : seqs) n_decode_seqs += seq.n_query < kMinPrefillRows ? 1 : 0;
  const bool group_decode_heads = tiled && group > 1 && n_decode_seqs * n_kv_heads >= 4 * int64_t(pool.size());
  std::vector<AttentionTask> tasks;
  for (int64_t s = 0; s < int64_t(seqs.size()); s++) {
    const int64_t n_query = seqs[size_t(s)].n_query;
    if (n_query >= kMinPrefillRows) {
      for (int64_t h = 0; h < n_kv_heads; h++)
        for (int64_t r = 0; r < n_query; r += kQueryChunk) tasks.push_back({s, h, r, std::min(n_query, r + kQueryChunk), true});
    } else if (group_decode_heads) {
      for (int64_t h = 0; h < n_kv_heads; h++) tasks.push_back({s, h, 0, n_query, true});
    } else {
      for (int64_t h = 0; h < n_heads; h++) tasks.push_back({s, h, 0, n_query, false});
    }
  }

  pool.parallel_for(int64_t(tasks.size()), [&](int64_t index, int) {
    const AttentionTask& task = tasks[size_t(index)];
    const SeqInfo& seq = seqs[size_t(task.seq)];
    static thread_local std::vector<float> acc, keys, values;
    acc.resize(size_t(head_dim));
    auto position = [&](int64_t i) { return seq.ctx_len - seq.n_query + i; };
    if (tiled) {
      // Decode rows: one query head; a prefill chunk: every query head of its KV head.
      const int64_t kv_head = task.chunk ? task.head : task.head / group, h0 = task.chunk ? task.head * group : task.head;
      const int64_t n_h = task.chunk ? group : 1, t0 = seq.first_row + task.row0;
      HeadRows rows[kMaxGroup];
      for (int64_t i = 0; i < n_h; i++)
        rows[i] = {reinterpret_cast<const float*>(q.at(h0 + i, t0)), int64_t(q.nb[2] / sizeof(float)),
                   reinterpret_cast<float*>(dst.at(h0 + i, t0)), int64_t(dst.nb[2] / sizeof(float)), sink_of(h0 + i)};
      auto cache_row = [&](int64_t j, bool value) {
        const int64_t slot = kv_slot(block_tables, task.seq, j, block_size);
        return value ? v_cache.at(kv_head, slot) : k_cache.at(kv_head, slot);
      };
      attend_tiled(k, k_cache.dtype, cache_row, head_dim, rows, n_h, task.row1 - task.row0, position(task.row0), a.params.sliding_window,
                   seq.non_causal ? seq.ctx_len - 1 : -1, key_score);
      return;
    }
    if (!task.chunk) {
      const int64_t h = task.head, kv_head = h / group;
      for (int64_t i = task.row0; i < task.row1; i++) {
        const int64_t t = seq.first_row + i, pos = position(i);
        const float* qv = reinterpret_cast<const float*>(q.at(h, t));
        attend_row(
            first_visible_key(pos, a.params.sliding_window), seq.last_key(pos), head_dim,
            [&](int64_t j) {
              return key_score(dot_kv(k, k_cache.dtype, k_cache.at(kv_head, kv_slot(block_tables, task.seq, j, block_size)), qv, head_dim));
            },
            [&](float p, int64_t j, float* sum) {
              axpy_kv(k, v_cache.dtype, p, v_cache.at(kv_head, kv_slot(block_tables, task.seq, j, block_size)), sum, head_dim);
            },
            acc.data(), reinterpret_cast<float*>(dst.at(h, t)), sink_of(h));
      }
      return;
    }
    // A prefill chunk: the keys its rows see, [first, last], as f32 rows.
    const int64_t kv_head = task.head;
    const int64_t first = first_visible_key(position(task.row0), a.params.sliding_window), last = seq.last_key(position(task.row1 - 1));
    const size_t n_keys = size_t(last - first + 1);
    keys.resize(n_keys * size_t(head_dim));
    values.resize(n_keys * size_t(head_dim));
    for (int64_t j = first; j <= last; j++) {
      const int64_t slot = kv_slot(block_tables, task.seq, j, block_size);
      row_to_f32(k, k_cache.dtype, k_cache.at(kv_head, slot), keys.data() + size_t(j - first) * size_t(head_dim), head_dim);
      row_to_f32(k, v_cache.dtype, v_cache.at(kv_head, slot), values.data() + size_t(j - first) * size_t(head_dim), head_dim);
    }
    for (int64_t h = kv_head * group; h < (kv_head + 1) * group; h++) {
      for (int64_t i = task.row0; i < task.row1; i++) {
        const int64_t t = seq.first_row + i, pos = position(i);
        const float* qv = reinterpret_cast<const float*>(q.at(h, t));
        attend_row(
            first_visible_key(pos, a.params.sliding_window), seq.last_key(pos), head_dim,
            [&](int64_t j) { return key_score(k.vdot_f32(keys.data() + size_t(j - first) * size_t(head_dim), qv, head_dim)); },
            [&](float p, int64_t j, float* sum) { k.axpy_f32(p, values.data() + size_t(j - first) * size_t(head_dim), sum, head_dim); },
            acc.data(), reinterpret_cast<float*>(dst.at(h, t)), sink_of(h));
      }
    }
  });
}

// An encoder's attention: each sequence's keys are its own rows of the K and V tensors, read by the
// prefill chunks' tiled pass (kQueryChunk query rows with every query head of one KV head); a vision
// encoder's 4096 patches spend most of their attention time in float_dots there instead of in a dot
// product per (row, key, head).
namespace {

// Query rows per task: each task converts its keys' tiles once, so more rows share each conversion
// (4096 patches: 32 tasks per head instead of 128).
constexpr int64_t kEncoderQueryChunk = 128;

// One task of an encoder's attention: rows [row0, row1) of sequence `seq` for head `head` (a query
// head or a KV head, as the caller numbers them).
struct EncoderTask {
  size_t seq;
  int64_t head, row0, row1;
};
std::vector<EncoderTask> encoder_tasks(const std::vector<RowRange>& seqs, int64_t n_heads) {
  std::vector<EncoderTask> tasks;
  for (size_t s = 0; s < seqs.size(); s++)
    for (int64_t h = 0; h < n_heads; h++)
      for (int64_t r = 0; r < seqs[s].count; r += kEncoderQueryChunk) tasks.push_back({s, h, r, std::min(seqs[s].count, r + kEncoderQueryChunk)});
  return tasks;
}

// Keys of a sequence transposed: `count` keys padded to the kernel's blocks of 32.
int64_t transposed_keys(int64_t count) { return (count + 31) / 32 * 32; }

// ATTENTION through the table's encoder_attention blocks: every (sequence, KV head)'s keys transposed
// once (keys across the vector lanes, in blocks of 32, zero-padded) and its values side by side (in
// the tensor a head's value rows lie a whole row of heads apart: 4.6 KB in a 16-head encoder), then
// one task per (sequence, head, 128 rows).
void encoder_attention_by_block(const OpArgs& a, const std::vector<RowRange>& seqs, ThreadPool& pool, const Kernels& k) {
  const Tensor &q = a.src[0], &keys = a.src[1], &values = a.src[2], &dst = a.dst;
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], n_kv_heads = keys.ne[1], group = n_heads / n_kv_heads;
  // Floats per (sequence, KV head): transposed keys, then value rows.
  std::vector<int64_t> kt_offset(seqs.size() * size_t(n_kv_heads) + 1, 0), v_offset(kt_offset);
  for (size_t s = 0; s < seqs.size(); s++)
    for (int64_t h = 0; h < n_kv_heads; h++) {
      const size_t i = s * size_t(n_kv_heads) + size_t(h);
      kt_offset[i + 1] = kt_offset[i] + head_dim * transposed_keys(seqs[s].count);
      v_offset[i + 1] = v_offset[i] + head_dim * seqs[s].count;
    }
  // Per call, not thread_local: the caller may be any HTTP worker, and each would keep its 38 MB.
  std::vector<float> kt(size_t(kt_offset.back()), 0.0f), packed_values(size_t(v_offset.back()));
  float* const kt_data = kt.data();
  float* const v_data = packed_values.data();
  pool.parallel_for(int64_t(seqs.size()) * n_kv_heads, [&](int64_t index, int) {
    const RowRange& seq = seqs[size_t(index / n_kv_heads)];
    const int64_t h = index % n_kv_heads;
    float* out = kt_data + kt_offset[size_t(index)];
    float* v_out = v_data + v_offset[size_t(index)];
    for (int64_t j = 0; j < seq.count; j++) {
      const auto* row = reinterpret_cast<const float*>(keys.at(h, seq.first + j));
      float* block = out + (j / 32) * head_dim * 32 + j % 32;
      for (int64_t d = 0; d < head_dim; d++) block[d * 32] = row[d];
      const auto* v_row = reinterpret_cast<const float*>(values.at(h, seq.first + j));
      std::copy(v_row, v_row + head_dim, v_out + j * head_dim);
    }
  });
  const std::vector<EncoderTask> tasks = encoder_tasks(seqs, n_heads);  // per query head
  pool.parallel_for(int64_t(tasks.size()), [&](int64_t index, int) {
    const EncoderTask& t = tasks[size_t(index)];
    const RowRange& seq = seqs[t.seq];
    const int64_t kvh = t.head / group, row = seq.first + t.row0;
    EncoderAttentionBlock block;
    block.q = reinterpret_cast<const float*>(q.at(t.head, row));
    block.q_stride = int64_t(q.nb[2] / sizeof(float));
    block.n_q = t.row1 - t.row0;
    block.q_pos0 = t.row0;
    block.kt = kt_data + kt_offset[t.seq * size_t(n_kv_heads) + size_t(kvh)];
    block.v = v_data + v_offset[t.seq * size_t(n_kv_heads) + size_t(kvh)];
    block.v_stride = head_dim;
    block.n_keys = seq.count;
    block.head_dim = head_dim;
    block.scale = a.params.attn_scale;
    block.causal = a.params.causal;
    block.out = reinterpret_cast<float*>(dst.at(t.head, row));
    block.out_stride = int64_t(dst.nb[2] / sizeof(float));
    k.encoder_attention(block, k.exp_shifted);
  });
}

}  // namespace

void fast_encoder_attention(const OpArgs& a, ThreadPool& pool, const Kernels& k) {
  const Tensor &q = a.src[0], &keys = a.src[1], &values = a.src[2], &dst = a.dst;
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], n_kv_heads = keys.ne[1], group = n_heads / n_kv_heads;
  constexpr int64_t kMaxGroup = 64;
  const bool tiled = k.float_dots != nullptr && k.exp_shifted != nullptr && k.weighted_values != nullptr && head_dim % 8 == 0 &&
                     group <= kMaxGroup && q.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float) && q.nb[2] % sizeof(float) == 0 &&
                     dst.nb[2] % sizeof(float) == 0;
  // The window and ALiBi (ABI 1.14: text encoders, short inputs) take the row-by-row path.
  if (!tiled || a.params.attn_window != 0 || a.params.alibi_max_bias != 0.0f) {
    return encoder_attention(a, [&pool](int64_t n, const std::function<void(int64_t)>& fn) {
      pool.parallel_for(n, [&](int64_t t, int) { fn(t); });
    }, {k.vdot_f32, k.axpy_f32});
  }
  const std::vector<RowRange> seqs = attention_sequences(a);
  const bool plain_rows = keys.nb[0] == sizeof(float) && values.nb[0] == sizeof(float) && keys.nb[2] % sizeof(float) == 0 &&
                          values.nb[2] % sizeof(float) == 0;
  if (k.encoder_attention != nullptr && head_dim <= 128 && plain_rows) return encoder_attention_by_block(a, seqs, pool, k);
  const std::vector<EncoderTask> tasks = encoder_tasks(seqs, n_kv_heads);  // per KV head, with its query heads
  const float scale = a.params.attn_scale;
  pool.parallel_for(int64_t(tasks.size()), [&](int64_t index, int) {
    const EncoderTask& task = tasks[size_t(index)];
    const RowRange& seq = seqs[task.seq];
    HeadRows rows[kMaxGroup];
    const int64_t h0 = task.head * group, t0 = seq.first + task.row0;
    for (int64_t i = 0; i < group; i++)
      rows[i] = {reinterpret_cast<const float*>(q.at(h0 + i, t0)), int64_t(q.nb[2] / sizeof(float)),
                 reinterpret_cast<float*>(dst.at(h0 + i, t0)), int64_t(dst.nb[2] / sizeof(float)), -std::numeric_limits<float>::infinity()};
    auto cache_row = [&](int64_t j, bool value) { return value ? values.at(task.head, seq.first + j) : keys.at(task.head, seq.first + j); };
    attend_tiled(k, LOOM_DTYPE_F32, cache_row, head_dim, rows, group, task.row1 - task.row0, task.row0, /*window=*/0,
                 a.params.causal ? -1 : seq.count - 1, [scale](float dot) { return dot * scale; });
  });
}

}  // namespace loom::cpu
