#include "recurrent_ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace loom::cpu {

namespace {

struct SeqEntry {
  int64_t first = 0, n = 0, slot = 0;
  bool fresh = false;
};

// The seqs table [4, n_seqs], checked against the batch and the state pool: rows inside the batch,
// slots inside the pool and distinct (two sequences updating one slot would race).
std::vector<SeqEntry> read_seqs(const Tensor& seqs, int64_t n_tok, int64_t n_slots, const char* op) {
  std::vector<SeqEntry> out(static_cast<size_t>(seqs.ne[1]));
  std::vector<int64_t> slots;
  for (int64_t s = 0; s < seqs.ne[1]; ++s) {
    const auto* d = reinterpret_cast<const int32_t*>(seqs.at(s));
    SeqEntry& e = out[static_cast<size_t>(s)];
    e = {d[0], d[1], d[2], d[3] != 0};
    const std::string name = std::string(op) + ": sequence " + std::to_string(s);
    if (e.first < 0 || e.n < 0 || e.first + e.n > n_tok)
      invalid(name + " rows [" + std::to_string(e.first) + ", +" + std::to_string(e.n) + ") are outside the batch of " + std::to_string(n_tok));
    if (e.slot < 0 || e.slot >= n_slots)
      invalid(name + " state slot " + std::to_string(e.slot) + " is outside the pool of " + std::to_string(n_slots));
    slots.push_back(e.slot);
  }
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) invalid(std::string(op) + ": two sequences share a state slot");
  return out;
}

float* f32_at(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) { return reinterpret_cast<float*>(t.at(i1, i2, i3)); }

}  // namespace

float dot_in_order(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void ssm_conv(const OpArgs& a, const TaskRunner& run) {
  const Tensor &x = a.src[0], &w = a.src[1], &states = a.src[2];
  const int64_t channels = x.ne[0], n_tok = x.ne[1], d_conv = w.ne[0], d_state = d_conv - 1;
  const std::vector<SeqEntry> seqs = read_seqs(a.src[3], n_tok, states.ne[2], "SSM_CONV");
  constexpr int64_t kChannelsPerTask = 256;
  const int64_t n_tasks = (channels + kChannelsPerTask - 1) / kChannelsPerTask;
  run(n_tasks, [&](int64_t task) {
    const int64_t c0 = task * kChannelsPerTask, c1 = std::min(channels, c0 + kChannelsPerTask), cb = c1 - c0;
    // Tap-major copies of the block's kernel and of its window (a ring of d_conv rows of cb channels),
    // so every inner loop runs along the channels, which x and dst store contiguously.
    std::vector<float> taps(static_cast<size_t>(d_conv * cb)), ring(static_cast<size_t>(d_conv * cb)), acc(static_cast<size_t>(cb));
    for (int64_t c = 0; c < cb; ++c) {
      for (int64_t i = 0; i < d_conv; ++i) taps[static_cast<size_t>(i * cb + c)] = f32_at(w, c0 + c)[i];
    }
    auto ring_row = [&](int64_t r) { return ring.data() + r % d_conv * cb; };
    std::vector<const float*> window(static_cast<size_t>(d_state));
    for (const SeqEntry& s : seqs) {
      for (int64_t c = 0; c < cb; ++c) {
        const float* state = f32_at(states, c0 + c, s.slot);
        for (int64_t i = 0; i < d_state; ++i) ring[static_cast<size_t>(i * cb + c)] = s.fresh ? 0.0f : state[i];
      }
      int64_t oldest = 0;  // the ring row holding the window's first tap
      for (int64_t t = 0; t < s.n; ++t) {
        float* newest = ring_row(oldest + d_state);
        std::copy_n(f32_at(x, s.first + t) + c0, cb, newest);  // read before the write below: dst may be x
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t i = 0; i < d_conv; ++i) {
          const float* in = ring_row(oldest + i);
          const float* tap = taps.data() + i * cb;
          for (int64_t c = 0; c < cb; ++c) acc[static_cast<size_t>(c)] += tap[c] * in[c];
        }
        std::copy(acc.begin(), acc.end(), f32_at(a.dst, s.first + t) + c0);
        oldest = (oldest + 1) % d_conv;
      }
      // The window's rows looked up once: ring_row's modulo per (channel, tap) cost more than the
      // convolution itself in decode (one token per sequence).
      for (int64_t i = 0; i < d_state; ++i) window[static_cast<size_t>(i)] = ring_row(oldest + i);
      for (int64_t c = 0; c < cb; ++c) {
        float* state = f32_at(states, c0 + c, s.slot);
        for (int64_t i = 0; i < d_state; ++i) state[i] = window[static_cast<size_t>(i)][c];
      }
    }
  });
}

void gated_delta_net(const OpArgs& a, const TaskRunner& run, const DeltaRuleKernels& kernels) {
  const Tensor &qk = a.src[0], &v = a.src[1], &g = a.src[2], &beta = a.src[3], &states = a.src[4];
  const int64_t d_k = qk.ne[0], n_k_heads = qk.ne[1], n_tok = qk.ne[3];
  const int64_t d_v = v.ne[0], n_v_heads = v.ne[1];
  const std::vector<SeqEntry> seqs = read_seqs(a.src[5], n_tok, states.ne[3], "GATED_DELTA_NET");
  const OpParams& p = a.params;
  const bool chunked_fits = delta_rule_chunked_fits(kernels.chunk, d_k, d_v);
  run(static_cast<int64_t>(seqs.size()) * n_v_heads, [&](int64_t task) {
    const SeqEntry& s = seqs[static_cast<size_t>(task / n_v_heads)];
    const int64_t h = task % n_v_heads, hk = p.delta_grouped_heads ? h / (n_v_heads / n_k_heads) : h % n_k_heads;
    // S[i, j] at state[j * d_k + i]: each value dim j is one contiguous row over the key dims.
    float* state = f32_at(states, 0, h, s.slot);
    if (s.fresh) std::fill_n(state, d_k * d_v, 0.0f);
    auto load = [&](float* out, const float* in) {
      std::copy(in, in + d_k, out);
      if (!p.delta_normalize_qk) return;
      float sum = 0.0f;
      for (int64_t i = 0; i < d_k; ++i) sum += in[i] * in[i];
      const float inv = 1.0f / std::sqrt(sum + p.delta_l2_eps);
      for (int64_t i = 0; i < d_k; ++i) out[i] *= inv;
    };
    if (chunked_fits) {
      DeltaRuleTokens tokens;
      tokens.d_k = d_k;
      tokens.d_v = d_v;
      tokens.q_scale = p.delta_q_scale;
      tokens.load_qk = [&](int64_t t, float* q, float* k) {
        load(q, f32_at(qk, hk, 0, s.first + t));
        load(k, f32_at(qk, hk, 1, s.first + t));
      };
      tokens.v = [&](int64_t t) -> const float* { return f32_at(v, h, s.first + t); };
      tokens.log_decay = [&](int64_t t) { return f32_at(g, s.first + t)[h]; };
      tokens.beta = [&](int64_t t) { return f32_at(beta, s.first + t)[h]; };
      tokens.out = [&](int64_t t) { return f32_at(a.dst, h, s.first + t); };
      if (s.n >= kMinChunkedTokens) return delta_rule_chunked(tokens, s.n, state, kernels.chunk);
      for (int64_t t = 0; t < s.n; ++t) delta_rule_token(tokens, t, state, kernels.chunk);
      return;
    }
    std::vector<float> q(static_cast<size_t>(d_k)), k(static_cast<size_t>(d_k));
    for (int64_t t = s.first; t < s.first + s.n; ++t) {
      load(q.data(), f32_at(qk, hk, 0, t));
      load(k.data(), f32_at(qk, hk, 1, t));
      const float* vt = f32_at(v, h, t);
      const float decay = std::exp(f32_at(g, t)[h]), b = f32_at(beta, t)[h];
      float* out = f32_at(a.dst, h, t);
      for (int64_t j = 0; j < d_v; ++j) {
        float* row = state + j * d_k;
        for (int64_t i = 0; i < d_k; ++i) row[i] *= decay;
        const float delta = (vt[j] - kernels.dot(row, k.data(), d_k)) * b;
        for (int64_t i = 0; i < d_k; ++i) row[i] += k[static_cast<size_t>(i)] * delta;
        out[j] = kernels.dot(row, q.data(), d_k) * p.delta_q_scale;
      }
    }
  });
}

}  // namespace loom::cpu
