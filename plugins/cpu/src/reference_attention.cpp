// Reference STORE_KV and PAGED_ATTENTION: dense softmax over keys gathered through the block table.
#include <algorithm>
#include <cmath>
#include <vector>

#include "reference_ops.h"

namespace loom::cpu {

std::vector<SeqInfo> read_seqs(const OpArgs& a) {
  const Tensor &q = a.src[0], &k_cache = a.src[1], &block_tables = a.src[3], &seqs = a.src[4];
  const int64_t n_tok = q.ne[2], n_slots = k_cache.ne[2], block_size = a.params.block_size;
  const int64_t max_blocks = block_tables.ne[0];
  std::vector<SeqInfo> out;
  for (int64_t s = 0; s < seqs.ne[1]; s++) {
    const auto* col = reinterpret_cast<const int32_t*>(seqs.at(s));
    const std::string where = "PAGED_ATTENTION: sequence " + std::to_string(s) + ": ";
    if (a.params.seq_flags && (col[3] & ~LOOM_SEQ_NON_CAUSAL) != 0) invalid(where + "unknown flags " + std::to_string(col[3]));
    const SeqInfo info{col[0], col[1], col[2], a.params.seq_flags && (col[3] & LOOM_SEQ_NON_CAUSAL) != 0};
    if (info.first_row < 0 || info.n_query < 0 || info.first_row + info.n_query > n_tok)
      invalid(where + "query rows [" + std::to_string(info.first_row) + ", +" + std::to_string(info.n_query) +
              ") are outside the batch of " + std::to_string(n_tok) + " rows");
    if (info.n_query > info.ctx_len) invalid(where + "context length " + std::to_string(info.ctx_len) + " is shorter than its query rows");
    if (info.ctx_len > max_blocks * block_size)
      invalid(where + "context length " + std::to_string(info.ctx_len) + " needs more than the " + std::to_string(max_blocks) + " blocks of its table");
    const auto* table = reinterpret_cast<const int32_t*>(block_tables.at(s));
    for (int64_t b = 0; b < (info.ctx_len + block_size - 1) / block_size; b++)
      if (table[b] < 0 || (int64_t(table[b]) + 1) * block_size > n_slots)
        invalid(where + "block " + std::to_string(table[b]) + " is outside the cache of " + std::to_string(n_slots / block_size) + " blocks");
    out.push_back(info);
  }
  return out;
}

namespace {

void store_row(const Tensor& cache, int64_t head, int64_t slot, const float* x) {
  uint8_t* row = cache.at(head, slot);
  const int64_t n = cache.ne[0];
  if (cache.dtype == LOOM_DTYPE_F32) std::copy(x, x + n, reinterpret_cast<float*>(row));
  else if (cache.dtype == LOOM_DTYPE_F16)
    for (int64_t i = 0; i < n; i++) reinterpret_cast<uint16_t*>(row)[i] = float_to_half(x[i]);
  else quantize_kv_row(cache.dtype, x, row, n);
}

}  // namespace

// k, v [head_dim, n_kv_heads, n_tok] → caches [head_dim, n_kv_heads, n_slots] at slot_mapping[t].
void reference_store_kv(const OpArgs& a) {
  const Tensor &k = a.src[0], &v = a.src[1], &slots = a.src[2], &k_cache = a.src[3], &v_cache = a.src[4];
  for (int64_t t = 0; t < k.ne[2]; t++) {
    if (reinterpret_cast<const int32_t*>(slots.data)[t] < 0) continue;  // negative = padding, skip
    const int64_t slot = checked_index(slots, t, k_cache.ne[2], "STORE_KV: slot");
    for (int64_t h = 0; h < k.ne[1]; h++) {
      store_row(k_cache, h, slot, reinterpret_cast<const float*>(k.at(h, t)));
      store_row(v_cache, h, slot, reinterpret_cast<const float*>(v.at(h, t)));
    }
  }
}

// q [head_dim, n_heads, n_tok], caches [head_dim, n_kv_heads, n_slots] → dst [head_dim, n_heads, n_tok]
void reference_paged_attention(const OpArgs& a) {
  const Tensor &q = a.src[0], &k_cache = a.src[1], &v_cache = a.src[2], &block_tables = a.src[3], &dst = a.dst;
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], n_kv_heads = k_cache.ne[1];
  const int64_t group = n_heads / n_kv_heads;
  const int64_t block_size = a.params.block_size;
  const std::vector<SeqInfo> seqs = read_seqs(a);

  std::vector<float> k_row(static_cast<size_t>(head_dim)), v_row(static_cast<size_t>(head_dim));  // [head_dim]
  std::vector<double> scores, out(static_cast<size_t>(head_dim));
  for (size_t s = 0; s < seqs.size(); s++) {
    const SeqInfo& seq = seqs[s];
    for (int64_t i = 0; i < seq.n_query; i++) {
      const int64_t t = seq.first_row + i;
      const int64_t pos = seq.ctx_len - seq.n_query + i;  // this query's position
      const int64_t first = first_visible_key(pos, a.params.sliding_window);
      for (int64_t h = 0; h < n_heads; h++) {
        const int64_t kv_head = h / group;
        const float* qv = reinterpret_cast<const float*>(q.at(h, t));
        // scores[j] = softcap(q · k_j * scale) for every visible key j
        const int64_t last = seq.last_key(pos);
        scores.assign(size_t(last - first + 1), 0.0);
        for (int64_t j = first; j <= last; j++) {
          dequantize_row(k_cache.dtype, k_cache.at(kv_head, kv_slot(block_tables, int64_t(s), j, block_size)), k_row.data(), head_dim);
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; d++) dot += double(qv[d]) * k_row[size_t(d)];
          dot *= a.params.attn_scale;
          if (a.params.softcap > 0.0f) dot = a.params.softcap * std::tanh(dot / a.params.softcap);
          scores[size_t(j - first)] = dot;
        }
        // A sink (gpt-oss) is one more score in the softmax, with no value behind it.
        const bool has_sink = a.src[5].present();
        const double sink = has_sink ? double(reinterpret_cast<const float*>(a.src[5].data + uint64_t(h) * a.src[5].nb[0])[0]) : 0.0;
        double max = *std::max_element(scores.begin(), scores.end());
        if (has_sink) max = std::max(max, sink);
        double sum = has_sink ? std::exp(sink - max) : 0.0;
        for (double& sc : scores) sum += sc = std::exp(sc - max);
        // out = Σ_j softmax_j · v_j
        std::fill(out.begin(), out.end(), 0.0);
        for (int64_t j = first; j <= last; j++) {
          dequantize_row(v_cache.dtype, v_cache.at(kv_head, kv_slot(block_tables, int64_t(s), j, block_size)), v_row.data(), head_dim);
          const double p = scores[size_t(j - first)] / sum;
          for (int64_t d = 0; d < head_dim; d++) out[size_t(d)] += p * v_row[size_t(d)];
        }
        float* o = reinterpret_cast<float*>(dst.at(h, t));
        for (int64_t d = 0; d < head_dim; d++) o[d] = float(out[size_t(d)]);
      }
    }
  }
}

}  // namespace loom::cpu
