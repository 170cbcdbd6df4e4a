// Mixture-of-experts routing, the weighted sum, and the reference expert matmul.
#include "moe_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "reference_ops.h"

namespace loom::cpu {

namespace {

const int32_t* id_row(const Tensor& ids, int64_t t) { return reinterpret_cast<const int32_t*>(ids.at(t)); }

}  // namespace

void moe_route_rows(const OpArgs& a, int64_t t0, int64_t t1) {
  const Tensor &logits = a.src[0], &ids = a.src[1], &weights = a.dst;
  const int64_t n_expert = logits.ne[0], n_used = a.params.moe_n_used;
  std::vector<float> score(static_cast<size_t>(n_expert));
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int64_t t = t0; t < t1; t++) {
    const float* x = logits.frow(t);
    const float max = *std::max_element(x, x + n_expert);
    switch (a.params.moe_gating) {
      case LOOM_MOE_GATING_SOFTMAX: {
        double sum = 0.0;
        for (int64_t e = 0; e < n_expert; e++) sum += score[size_t(e)] = std::exp(x[e] - max);
        for (float& s : score) s = float(s / sum);
        break;
      }
      case LOOM_MOE_GATING_SIGMOID:
        for (int64_t e = 0; e < n_expert; e++) score[size_t(e)] = 1.0f / (1.0f + std::exp(-x[e]));
        break;
      default:  // SOFTMAX_CHOSEN: choose by logit, weigh below
        std::copy(x, x + n_expert, score.begin());
    }
    // The n_used best, best first; equal scores keep the lower expert first.
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n_used, order.end(), [&](int32_t l, int32_t r) {
      return score[size_t(l)] > score[size_t(r)] || (score[size_t(l)] == score[size_t(r)] && l < r);
    });
    auto* out_ids = reinterpret_cast<int32_t*>(ids.at(t));
    float* w = weights.frow(t);
    for (int64_t j = 0; j < n_used; j++) {
      out_ids[j] = order[size_t(j)];
      w[j] = score[size_t(order[size_t(j)])];
    }
    if (a.params.moe_gating == LOOM_MOE_GATING_SOFTMAX_CHOSEN) {
      const float best = w[0];  // the chosen come best first
      double sum = 0.0;
      for (int64_t j = 0; j < n_used; j++) sum += w[j] = std::exp(w[j] - best);
      for (int64_t j = 0; j < n_used; j++) w[j] = float(w[j] / sum);
    }
    if (a.params.moe_normalize) {
      float sum = 0.0f;
      for (int64_t j = 0; j < n_used; j++) sum += w[j];
      sum = std::max(sum, 6.103515625e-5f);  // the smallest normal F16, as llama.cpp clamps it
      for (int64_t j = 0; j < n_used; j++) w[j] /= sum;
    }
    if (a.params.scale != 1.0f)
      for (int64_t j = 0; j < n_used; j++) w[j] *= a.params.scale;
  }
}

void moe_sum_rows(const OpArgs& a, int64_t t0, int64_t t1) {
  const Tensor &x = a.src[0], &weights = a.src[1], &dst = a.dst;
  const int64_t ne0 = x.ne[0], n_used = x.ne[1];
  for (int64_t t = t0; t < t1; t++) {
    float* out = dst.frow(t);
    const float* w = weights.frow(t);
    for (int64_t i = 0; i < ne0; i++) out[i] = 0.0f;
    for (int64_t j = 0; j < n_used; j++) {
      const auto* xj = reinterpret_cast<const float*>(x.at(j, t));
      for (int64_t i = 0; i < ne0; i++) out[i] += w[j] * xj[i];
    }
  }
}

ExpertGroups group_rows_by_expert(const OpArgs& a) {
  const Tensor &w = a.src[0], &ids = a.src[2];
  const int64_t n_expert = w.ne[2], n_used = ids.ne[0], n_tok = ids.ne[1];
  ExpertGroups g;
  g.first.assign(static_cast<size_t>(n_expert + 1), 0);
  for (int64_t t = 0; t < n_tok; t++) {
    for (int64_t j = 0; j < n_used; j++) {
      const int32_t e = id_row(ids, t)[j];
      if (e < 0 || e >= n_expert)
        invalid("MOE_MATMUL: expert id " + std::to_string(e) + " of token " + std::to_string(t) + " is outside [0, " +
                std::to_string(n_expert) + ")");
      g.first[size_t(e) + 1]++;
    }
  }
  std::partial_sum(g.first.begin(), g.first.end(), g.first.begin());
  g.rows.resize(static_cast<size_t>(n_tok * n_used));
  std::vector<int64_t> next(g.first.begin(), g.first.end() - 1);
  for (int64_t t = 0; t < n_tok; t++)
    for (int64_t j = 0; j < n_used; j++) g.rows[size_t(next[size_t(id_row(ids, t)[j])]++)] = t * n_used + j;
  return g;
}

// dst[:, j, t] = x[:, j or 0, t] · W[ids[j, t]]ᵀ, one dot product at a time in double.
void reference_moe_matmul(const OpArgs& a) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const ExpertGroups groups = group_rows_by_expert(a);  // checks the ids
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_used = a.src[2].ne[0];
  std::vector<float> w_row(static_cast<size_t>(n_in));
  for (int64_t e = 0; e + 1 < int64_t(groups.first.size()); e++) {
    for (int64_t o = 0; o < n_out; o++) {
      dequantize_row(w.dtype, w.at(o, e), w_row.data(), n_in);
      for (int64_t r = groups.first[size_t(e)]; r < groups.first[size_t(e) + 1]; r++) {
        const int64_t t = groups.rows[size_t(r)] / n_used, j = groups.rows[size_t(r)] % n_used;
        const auto* xr = reinterpret_cast<const float*>(x.at(x.ne[1] == 1 ? 0 : j, t));
        double sum = 0.0;
        for (int64_t i = 0; i < n_in; i++) sum += double(w_row[size_t(i)]) * double(xr[i]);
        if (a.src[3].present()) sum += double(reinterpret_cast<const float*>(a.src[3].at(e))[o]);
        reinterpret_cast<float*>(dst.at(j, t))[o] = float(sum);
      }
    }
  }
}

}  // namespace loom::cpu
