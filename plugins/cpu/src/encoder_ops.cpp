#include "encoder_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::cpu {

void axpy_in_order(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

// y = (x - mean) / sqrt(var + eps) * w + b, row by row; mean and variance in double.
void layer_norm(const OpArgs& a, const TaskRunner& run) {
  const Tensor &x = a.src[0], &w = a.src[1], &b = a.src[2];
  const int64_t n = x.ne[0];
  const float* weight = w.present() ? w.frow(0) : nullptr;
  const float* bias = b.present() ? b.frow(0) : nullptr;
  run(x.n_rows(), [&](int64_t r) {
    const float* xr = x.frow(r);
    float* out = a.dst.frow(r);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += xr[i];
    const double mean = sum / double(n);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; i++) sum_sq += (xr[i] - mean) * (xr[i] - mean);
    const float inv_std = float(1.0 / std::sqrt(sum_sq / double(n) + double(a.params.eps)));
    const float m = float(mean);
    for (int64_t i = 0; i < n; i++) {
      float v = (xr[i] - m) * inv_std;
      if (weight != nullptr) v *= weight[i];
      if (bias != nullptr) v += bias[i];
      out[i] = v;
    }
  });
}

std::vector<RowRange> attention_sequences(const OpArgs& a) {
  const int64_t n_tok = a.src[0].ne[2];
  if (!a.src[3].present()) return {{0, n_tok}};
  const Tensor& seqs = a.src[3];
  std::vector<RowRange> out;
  for (int64_t s = 0; s < seqs.ne[1]; s++) {
    const auto* col = reinterpret_cast<const int32_t*>(seqs.at(s));
    const RowRange range{col[0], col[1]};
    if (range.first < 0 || range.count < 0 || range.first + range.count > n_tok)
      invalid("ATTENTION: sequence " + std::to_string(s) + " (rows " + std::to_string(range.first) + " + " +
              std::to_string(range.count) + ") lies outside the " + std::to_string(n_tok) + " rows of q");
    out.push_back(range);
  }
  return out;
}

namespace {

// ALiBi's slope for head h, as ggml's soft_max_ext computes it from max_bias (ABI 1.14).
float alibi_slope(int64_t h, int64_t n_heads, float max_bias) {
  const auto n_log2 = int64_t(1) << int64_t(std::floor(std::log2(double(n_heads))));
  const float m0 = std::pow(2.0f, -max_bias / float(n_log2)), m1 = std::pow(2.0f, -max_bias / 2.0f / float(n_log2));
  return h < n_log2 ? std::pow(m0, float(h + 1)) : std::pow(m1, float(2 * (h - n_log2) + 1));
}

}  // namespace

// One task per (sequence, head, query row): scores against the sequence's keys (all of them, those up
// to the row when causal, or those within the symmetric window), softmax, then the weighted sum of
// values. Rows outside every sequence are left as they are.
void encoder_attention(const OpArgs& a, const TaskRunner& run, const EncoderKernels& k) {
  const Tensor &q = a.src[0], &keys = a.src[1], &values = a.src[2], &dst = a.dst;
  const int64_t head_dim = q.ne[0], n_heads = q.ne[1], group = n_heads / keys.ne[1];
  const std::vector<RowRange> seqs = attention_sequences(a);
  std::vector<int64_t> row_seq(size_t(q.ne[2]), -1);
  std::vector<int64_t> rows;  // every query row that belongs to a sequence, in order
  for (size_t s = 0; s < seqs.size(); s++)
    for (int64_t i = 0; i < seqs[s].count; i++) {
      row_seq[size_t(seqs[s].first + i)] = int64_t(s);
      rows.push_back(seqs[s].first + i);
    }
  run(int64_t(rows.size()) * n_heads, [&](int64_t task) {
    const int64_t row = rows[size_t(task / n_heads)], h = task % n_heads, kv_h = h / group;
    const RowRange& seq = seqs[size_t(row_seq[size_t(row)])];
    const int64_t i = row - seq.first, half = int64_t(a.params.attn_window / 2);
    int64_t first = 0, n_keys = a.params.causal ? i + 1 : seq.count;
    if (a.params.attn_window != 0) {
      first = std::max<int64_t>(0, i - half);
      n_keys = std::min(seq.count, i + half + 1) - first;
    }
    const float slope = a.params.alibi_max_bias > 0.0f ? alibi_slope(h, n_heads, a.params.alibi_max_bias) : 0.0f;
    const auto* qr = reinterpret_cast<const float*>(q.at(h, row));
    std::vector<float> scores(static_cast<size_t>(n_keys));
    float max = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
      const int64_t key = first + j;
      float score = k.dot(qr, reinterpret_cast<const float*>(keys.at(kv_h, seq.first + key)), head_dim) * a.params.attn_scale;
      if (slope != 0.0f) score -= slope * float(std::abs(i - key));
      scores[size_t(j)] = score;
      max = std::max(max, score);
    }
    double sum = 0.0;
    for (float& s : scores) sum += s = std::exp(s - max);
    auto* out = reinterpret_cast<float*>(dst.at(h, row));
    std::fill(out, out + head_dim, 0.0f);
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < n_keys; j++)
      k.axpy(scores[size_t(j)] * inv, reinterpret_cast<const float*>(values.at(kv_h, seq.first + first + j)), out, head_dim);
  });
}

// One task per patch row of dst.
void image_patches(const OpArgs& a, const TaskRunner& run) {
  const Tensor &image = a.src[0], &dst = a.dst;
  const int64_t p = a.params.window, grid_w = image.ne[0] / p, channels = image.ne[2];
  run(dst.ne[1], [&](int64_t patch) {
    const int64_t px = patch % grid_w, py = patch / grid_w;
    float* out = dst.frow(patch);
    for (int64_t c = 0; c < channels; c++)
      for (int64_t ky = 0; ky < p; ky++) {
        const auto* src = reinterpret_cast<const float*>(image.at(py * p + ky, c)) + px * p;
        std::copy(src, src + p, out + p * (ky + p * c));
      }
  });
}

// One task per output cell: the mean of a k x k window of rows, summed in window order.
void pool_2d(const OpArgs& a, const TaskRunner& run) {
  const Tensor &x = a.src[0], &dst = a.dst;
  const int64_t k = a.params.window, channels = x.ne[0], out_w = dst.ne[1];
  const float inv = 1.0f / float(k * k);
  run(dst.ne[1] * dst.ne[2], [&](int64_t cell) {
    const int64_t i = cell % out_w, j = cell / out_w;
    auto* out = reinterpret_cast<float*>(dst.at(i, j));
    std::fill(out, out + channels, 0.0f);
    for (int64_t dy = 0; dy < k; dy++)
      for (int64_t dx = 0; dx < k; dx++) {
        const auto* in = reinterpret_cast<const float*>(x.at(k * i + dx, k * j + dy));
        for (int64_t c = 0; c < channels; c++) out[c] += in[c];
      }
    for (int64_t c = 0; c < channels; c++) out[c] *= inv;
  });
}

// As ggml_clamp: below min is min, above max is max (a NaN passes through).
void clamp(const OpArgs& a, const TaskRunner& run) {
  const float lo = a.params.clamp_min, hi = a.params.clamp_max;
  run(a.src[0].n_rows(), [&](int64_t r) {
    const float* x = a.src[0].frow(r);
    float* out = a.dst.frow(r);
    for (int64_t i = 0; i < a.src[0].ne[0]; i++) out[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
  });
}

}  // namespace loom::cpu
