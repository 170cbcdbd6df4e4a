#include "engine/speculative.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace loom {

double uniform_unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int32_t draw_from(std::span<const float> weights, double u) {
  double total = 0.0;
  for (float w : weights) total += std::isfinite(w) && w > 0.0f ? w : 0.0f;
  if (!(total > 0.0)) return -1;
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    const float w = weights[i];
    if (!(std::isfinite(w) && w > 0.0f)) continue;
    last_positive = static_cast<int32_t>(i);
    cumulative += w;
    if (target < cumulative) return last_positive;
  }
  return last_positive;  // rounding left the target just past the last partial sum
}

VerifyOutcome verify_draft(std::span<const float> p, std::span<const int32_t> draft, std::span<const float> q,
                           uint32_t n_vocab, std::mt19937_64& rng) {
  const size_t n_draft = draft.size();
  const size_t v = n_vocab;
  if (p.size() != (n_draft + 1) * v) throw Error("verify_draft: p must hold n_draft + 1 rows of n_vocab");
  const bool has_q = !q.empty();
  if (has_q && q.size() != n_draft * v) throw Error("verify_draft: q must hold n_draft rows of n_vocab");

  VerifyOutcome out;
  std::vector<float> residual;
  for (size_t i = 0; i < n_draft; ++i) {
    const int32_t x = draft[i];
    const float* p_row = p.data() + i * v;
    const float* q_row = has_q ? q.data() + i * v : nullptr;
    const double px = p_row[x];
    const double qx = has_q ? q_row[x] : 1.0;
    const double u = uniform_unit(rng);
    // u < min(1, p/q)  <=>  u * q < p  (q > 0 is checked by the caller).
    if (u * qx < px) {
      out.tokens.push_back(x);
      ++out.n_accepted;
      continue;
    }
    residual.assign(p_row, p_row + v);
    if (has_q) {
      for (size_t t = 0; t < v; ++t) {
        const float qt = std::isfinite(q_row[t]) ? std::max(q_row[t], 0.0f) : 0.0f;
        residual[t] = std::max(residual[t] - qt, 0.0f);
      }
    } else {
      residual[static_cast<size_t>(x)] = 0.0f;
    }
    int32_t token = draw_from(residual, uniform_unit(rng));
    // p <= q everywhere only happens when rounding made p and q (nearly) equal; then p itself is
    // the residual's limit.
    if (token < 0) token = draw_from(std::span<const float>(p_row, v), uniform_unit(rng));
    if (token < 0) throw Error("verify_draft: the target distribution is empty");
    out.tokens.push_back(token);
    return out;
  }
  const int32_t bonus = draw_from(p.subspan(n_draft * v, v), uniform_unit(rng));
  if (bonus < 0) throw Error("verify_draft: the target distribution is empty");
  out.tokens.push_back(bonus);
  return out;
}

}  // namespace loom
