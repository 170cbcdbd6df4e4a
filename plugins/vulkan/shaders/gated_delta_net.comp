#version 450
// GATED_DELTA_NET (ABI 1.6): the gated delta rule, token by token, over each sequence's state.
// One workgroup per (value head, sequence); invocation j owns value dimension j, i.e. row j of the
// head's state S[:, j] (contiguous over the key dims), so invocations never share state words. q and
// k of the token (L2-normalised when asked) are staged in shared memory. A dispatch runs only the
// rows in [t_lo, t_hi) (the host splits long batches, see record_gated_delta_net); the state carries
// over between dispatches, and a fresh sequence is zeroed by the dispatch that holds its first row.
#define RED_WG 64u
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer QKBuf { float QK[]; };
layout(std430, binding = 1) readonly buffer VBuf { float V[]; };
layout(std430, binding = 2) readonly buffer GBuf { float G[]; };
layout(std430, binding = 3) readonly buffer BBuf { float B[]; };
layout(std430, binding = 4) buffer SBuf { float S[]; };
layout(std430, binding = 5) readonly buffer QBuf { int Q[]; };
layout(std430, binding = 6) writeonly buffer DBuf { float D[]; };
#include "state_seqs.glsl"
layout(push_constant) uniform Push {
  uint qk_off, qk_nb1, qk_nb2, qk_nb3;
  uint v_off, v_nb1, v_nb2;
  uint g_off, g_nb1, b_off, b_nb1;
  uint s_off, s_nb1, s_nb2, s_nb3;
  uint q_off, q_nb1;
  uint d_off, d_nb1, d_nb2;
  uint d_k, n_k_heads, d_v, n_tok, n_slots, n_seqs, flags;  // flags: 1 normalise q/k, 2 grouped heads
  float l2_eps, q_scale;
  uint t_lo, t_hi;  // this dispatch's rows; the last window also owns first == n_tok (empty sequences)
} pc;

const uint MAX_DK = 256u;  // the host refuses larger heads
shared float qs[MAX_DK], ks[MAX_DK];

// Stage q (which 0) or k (1) of key head hk at row t, normalised when asked.
void stage(uint which, uint hk, uint t, uint lid) {
  uint src = (pc.qk_off + hk * pc.qk_nb1 + which * pc.qk_nb2 + t * pc.qk_nb3) >> 2;
  float part = 0.0;
  for (uint i = lid; i < pc.d_k; i += 64u) {
    float x = QK[src + i];
    part += x * x;
    if (which == 0u) qs[i] = x; else ks[i] = x;
  }
  float inv = (pc.flags & 1u) != 0u ? 1.0 / sqrt(wg_sum(part) + pc.l2_eps) : 1.0;
  barrier();
  for (uint i = lid; i < pc.d_k; i += 64u) {
    if (which == 0u) qs[i] *= inv; else ks[i] *= inv;
  }
}

void main() {
  uint lid = gl_LocalInvocationIndex;
  uint h = gl_WorkGroupID.x;
  uint hk = (pc.flags & 2u) != 0u ? h / (gl_NumWorkGroups.x / pc.n_k_heads) : h % pc.n_k_heads;
  for (uint s = gl_WorkGroupID.y; s < pc.n_seqs; s += gl_NumWorkGroups.y) {
    uint q = (pc.q_off + s * pc.q_nb1) >> 2;
    int first = Q[q], n = Q[q + 1], slot = Q[q + 2];
    bool fresh = Q[q + 3] != 0;
    if (!state_seq_ok(s, first, n, slot, pc.n_tok, pc.n_slots, pc.q_off, pc.q_nb1)) continue;
    uint st = (pc.s_off + h * pc.s_nb2 + uint(slot) * pc.s_nb3) >> 2;
    bool owns_first = uint(first) >= pc.t_lo && (uint(first) < pc.t_hi || pc.t_hi == pc.n_tok);
    if (fresh && owns_first)
      for (uint j = lid; j < pc.d_v; j += 64u)
        for (uint i = 0u; i < pc.d_k; i++) S[st + j * (pc.s_nb1 >> 2) + i] = 0.0;
    uint lo = max(uint(first), pc.t_lo), hi = min(uint(first + n), pc.t_hi);
    for (uint t = lo; t < hi; t++) {
      barrier();  // the previous token's q and k are no longer read
      stage(0u, hk, t, lid);
      stage(1u, hk, t, lid);
      barrier();
      float decay = exp(G[((pc.g_off + t * pc.g_nb1) >> 2) + h]);
      float beta = B[((pc.b_off + t * pc.b_nb1) >> 2) + h];
      uint v = (pc.v_off + h * pc.v_nb1 + t * pc.v_nb2) >> 2;
      uint d = (pc.d_off + h * pc.d_nb1 + t * pc.d_nb2) >> 2;
      for (uint j = lid; j < pc.d_v; j += 64u) {
        uint row = st + j * (pc.s_nb1 >> 2);
        float kv = 0.0;
        for (uint i = 0u; i < pc.d_k; i++) {
          float x = S[row + i] * decay;
          S[row + i] = x;
          kv += x * ks[i];
        }
        float delta = (V[v + j] - kv) * beta;
        float o = 0.0;
        for (uint i = 0u; i < pc.d_k; i++) {
          float x = S[row + i] + ks[i] * delta;
          S[row + i] = x;
          o += x * qs[i];
        }
        D[d + j] = o * pc.q_scale;
      }
    }
  }
}
