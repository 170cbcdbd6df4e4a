// The chunked gated delta rule. Per token r the rule is (S the [d_v x d_k] state, g_r its decay,
// b_r its beta, k and q normalised):
//
//   S_r = g_r S_{r-1} + u_r k_r^T,   u_r = b_r (v_r - g_r S_{r-1} k_r),   o_r = scale S_r q_r.
//
// Within a chunk starting from state S0, with G_r the running sum of the log decays (gamma_r =
// exp(G_r)), unrolling gives
//
//   u_s + sum_{t<s} b_s exp(G_s - G_t) (k_s . k_t) u_t = b_s v_s - b_s gamma_s S0 k_s
//
// a unit lower-triangular system (I + A) U = B. Forward substitution over the rows of
// [b gamma K | b V] gives W and U0 with U = U0 - W S0^T, and then
//
//   o_r   = scale (gamma_r S0 q_r + sum_{s<=r} exp(G_r - G_s) (q_r . k_s) u_s)
//   S_end = gamma_last S0 + sum_s exp(G_last - G_s) u_s k_s^T.
//
// Every exponent is a difference G_r - G_s with s <= r or a G_r itself, never positive, so nothing
// overflows however strong the decay (the differences are products of the tokens' decays in [0, 1]). The products over d_k and over the chunk's tokens go through
// float_dots; over the tokens, the operands are transposed so the sum runs along a row.
#include "delta_rule_chunked.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::cpu {

namespace {

int64_t round_up_8(int64_t n) { return (n + 7) / 8 * 8; }

// The per-thread matrices of one chunk, sized once for the largest head seen.
struct ChunkScratch {
  std::vector<float> q, k, wu, kk, qk, decay, ws, qs, ut, kt, p, pu, update;
  std::vector<float> gamma, beta, step;

  void reserve(int64_t d_k, int64_t d_v) {
    const auto c = static_cast<size_t>(kDeltaRuleChunk), dk = static_cast<size_t>(d_k), dv = static_cast<size_t>(d_v);
    auto fit = [](std::vector<float>& v, size_t n) {
      if (v.size() < n) v.resize(n);
    };
    for (auto* v : {&q, &k}) fit(*v, c * dk);
    fit(wu, c * (dk + dv));
    for (auto* v : {&kk, &qk, &decay, &p}) fit(*v, c * c);
    for (auto* v : {&ws, &qs, &pu}) fit(*v, c * dv);
    fit(ut, dv * c);
    fit(kt, dk * c);
    fit(update, dv * dk);
    for (auto* v : {&gamma, &beta, &step}) fit(*v, c);
  }
};

// dst[t * c + r] = dot(a row r, b row t) for r <= t < n, in blocks of 8 rows of b, each against only
// the rows of a up to its last: the lower triangle and a sliver above it (r up to the end of t's block).
void lower_dots(FloatDotsFn dots, int64_t d, const float* a, const float* b, int64_t n, float* dst, int64_t c) {
  for (int64_t t0 = 0; t0 < n; t0 += 8) {
    const int64_t rows = std::min<int64_t>(8, n - t0);
    dots(d, a, d, t0 + rows, b + t0 * d, d, rows, dst + t0 * c, c);
  }
}

// Tokens [first, first + n) (n <= kDeltaRuleChunk) over the state.
void run_chunk(const DeltaRuleTokens& tk, int64_t first, int64_t n, float* state, const DeltaChunkKernels& kern, ChunkScratch& m) {
  const int64_t dk = tk.d_k, dv = tk.d_v, c = kDeltaRuleChunk, padded = round_up_8(n), wu_stride = dk + dv;
  float *Q = m.q.data(), *K = m.k.data(), *WU = m.wu.data(), *gamma = m.gamma.data(), *B = m.beta.data();
  float log_gamma = 0.0f;
  for (int64_t r = 0; r < n; ++r) {
    tk.load_qk(first + r, Q + r * dk, K + r * dk);
    const float log_decay = tk.log_decay(first + r);
    m.step[static_cast<size_t>(r)] = std::exp(log_decay);
    log_gamma += log_decay;
    gamma[r] = std::exp(log_gamma);
    B[r] = tk.beta(first + r);
  }
  // decay[r][s] = exp(G_r - G_s), s <= r: the decays of tokens s+1..r, multiplied walking back
  // from the diagonal (one exp per token instead of one per pair).
  for (int64_t r = 0; r < n; ++r) {
    float* row = m.decay.data() + r * c;
    float e = 1.0f;
    for (int64_t s = r; s >= 0; --s) {
      row[s] = e;
      e *= m.step[static_cast<size_t>(s)];
    }
  }

  // k_s . k_t for t < s and q_r . k_s for s <= r.
  lower_dots(kern.dots, dk, K, K, n, m.kk.data(), c);
  lower_dots(kern.dots, dk, K, Q, n, m.qk.data(), c);

  // Forward substitution over the rows of [b gamma K | b V]: row s leaves as [W_s | U0_s].
  for (int64_t s = 0; s < n; ++s) {
    float* row = WU + s * wu_stride;
    const float bg = B[s] * gamma[s];
    const float* k = K + s * dk;
    const float* v = tk.v(first + s);
    for (int64_t i = 0; i < dk; ++i) row[i] = bg * k[i];
    for (int64_t j = 0; j < dv; ++j) row[dk + j] = B[s] * v[j];
    const float *kk = m.kk.data() + s * c, *decay = m.decay.data() + s * c;
    for (int64_t t = 0; t < s; ++t) kern.axpy(-B[s] * decay[t] * kk[t], WU + t * wu_stride, row, wu_stride);
  }

  // W S0^T and Q S0^T: both read the state before the chunk changes it.
  kern.dots(dk, state, dk, dv, WU, wu_stride, n, m.ws.data(), dv);
  kern.dots(dk, state, dk, dv, Q, dk, n, m.qs.data(), dv);

  // U = U0 - W S0^T, kept transposed (U^T, [d_v x padded]) so the sums over tokens run along rows.
  std::fill_n(m.ut.data(), dv * padded, 0.0f);
  for (int64_t s = 0; s < n; ++s) {
    const float* u0 = WU + s * wu_stride + dk;
    const float* ws = m.ws.data() + s * dv;
    for (int64_t j = 0; j < dv; ++j) m.ut[static_cast<size_t>(j * padded + s)] = u0[j] - ws[j];
  }

  // Outputs: P[r][s] = exp(G_r - G_s) (q_r . k_s) for s <= r, then P U.
  std::fill_n(m.p.data(), n * padded, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    float* p = m.p.data() + r * padded;
    const float *qk = m.qk.data() + r * c, *decay = m.decay.data() + r * c;
    for (int64_t s = 0; s <= r; ++s) p[s] = decay[s] * qk[s];
  }
  kern.dots(padded, m.ut.data(), padded, dv, m.p.data(), padded, n, m.pu.data(), dv);
  for (int64_t r = 0; r < n; ++r) {
    const float *qs = m.qs.data() + r * dv, *pu = m.pu.data() + r * dv;
    float* out = tk.out(first + r);
    for (int64_t j = 0; j < dv; ++j) out[j] = (gamma[r] * qs[j] + pu[j]) * tk.q_scale;
  }

  // State: S = gamma_last S0 + U^T K~, K~_s = exp(G_last - G_s) k_s (transposed, [d_k x padded]).
  std::fill_n(m.kt.data(), dk * padded, 0.0f);
  const float* to_last = m.decay.data() + (n - 1) * c;
  for (int64_t s = 0; s < n; ++s) {
    const float* k = K + s * dk;
    for (int64_t i = 0; i < dk; ++i) m.kt[static_cast<size_t>(i * padded + s)] = to_last[s] * k[i];
  }
  kern.dots(padded, m.kt.data(), padded, dk, m.ut.data(), padded, dv, m.update.data(), dk);
  const float gamma_last = gamma[n - 1];
  for (int64_t e = 0; e < dk * dv; ++e) state[e] = gamma_last * state[e] + m.update[static_cast<size_t>(e)];
}

}  // namespace

bool delta_rule_chunked_fits(const DeltaChunkKernels& k, int64_t d_k, int64_t d_v) {
  return k.dots != nullptr && k.axpy != nullptr && k.decay_add_outer != nullptr && d_k % 8 == 0 && d_v % 8 == 0;
}

void delta_rule_token(const DeltaRuleTokens& tk, int64_t t, float* state, const DeltaChunkKernels& kern) {
  const int64_t dk = tk.d_k, dv = tk.d_v;
  thread_local std::vector<float> kq, dots, corrections;  // rows k and q; S k and S q; u
  if (kq.size() < static_cast<size_t>(2 * dk)) kq.resize(static_cast<size_t>(2 * dk));
  if (dots.size() < static_cast<size_t>(2 * dv)) dots.resize(static_cast<size_t>(2 * dv));
  if (corrections.size() < static_cast<size_t>(dv)) corrections.resize(static_cast<size_t>(dv));
  float *k = kq.data(), *q = kq.data() + dk;
  tk.load_qk(t, q, k);
  kern.dots(dk, state, dk, dv, kq.data(), dk, 2, dots.data(), dv);
  float k_dot_q = 0.0f;
  kern.dots(dk, k, dk, 1, q, dk, 1, &k_dot_q, 1);
  const float decay = std::exp(tk.log_decay(t)), beta = tk.beta(t);
  const float* v = tk.v(t);
  float* out = tk.out(t);
  const float *s_k = dots.data(), *s_q = dots.data() + dv;
  float* u = corrections.data();
  for (int64_t j = 0; j < dv; ++j) {
    u[j] = beta * (v[j] - decay * s_k[j]);
    out[j] = (decay * s_q[j] + u[j] * k_dot_q) * tk.q_scale;
  }
  kern.decay_add_outer(state, dv, dk, decay, u, k);
}

void delta_rule_chunked(const DeltaRuleTokens& tokens, int64_t n, float* state, const DeltaChunkKernels& k) {
  thread_local ChunkScratch scratch;
  scratch.reserve(tokens.d_k, tokens.d_v);
  for (int64_t first = 0; first < n; first += kDeltaRuleChunk)
    run_chunk(tokens, first, std::min(kDeltaRuleChunk, n - first), state, k, scratch);
}

}  // namespace loom::cpu
