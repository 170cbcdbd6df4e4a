#version 450
// SSM_CONV (ABI 1.6): each sequence's rows of x [channels, n_tok] through a causal depthwise
// convolution of d_conv taps whose first d_conv - 1 inputs come from the sequence's state slot
// (zeros when fresh); the slot then keeps the last d_conv - 1 inputs. One invocation per channel, one
// workgroup row per sequence; an invocation reads each input before writing its output, so dst may
// alias x.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer XBuf { float X[]; };
layout(std430, binding = 1) readonly buffer WBuf { float W[]; };
layout(std430, binding = 2) buffer SBuf { float S[]; };
layout(std430, binding = 3) readonly buffer QBuf { int Q[]; };
layout(std430, binding = 4) buffer DBuf { float D[]; };
#include "state_seqs.glsl"
layout(push_constant) uniform Push {
  uint x_off, x_nb1, w_off, w_nb1, s_off, s_nb1, s_nb2, q_off, q_nb1, d_off, d_nb1;
  uint channels, n_tok, d_conv, n_slots, n_seqs;
} pc;

const uint MAX_TAPS = 16u;  // the host refuses wider kernels

void main() {
  for (uint s = gl_WorkGroupID.y; s < pc.n_seqs; s += gl_NumWorkGroups.y) {
    uint q = (pc.q_off + s * pc.q_nb1) >> 2;
    int first = Q[q], n = Q[q + 1], slot = Q[q + 2];
    bool fresh = Q[q + 3] != 0;
    if (!state_seq_ok(s, first, n, slot, pc.n_tok, pc.n_slots, pc.q_off, pc.q_nb1)) continue;
    for (uint c = gl_GlobalInvocationID.x; c < pc.channels; c += gl_NumWorkGroups.x * 64u) {
      uint st = (pc.s_off + c * pc.s_nb1 + uint(slot) * pc.s_nb2) >> 2;
      uint w = (pc.w_off + c * pc.w_nb1) >> 2;
      uint k = pc.d_conv - 1u;
      float win[MAX_TAPS];
      for (uint i = 0u; i < k; i++) win[i] = fresh ? 0.0 : S[st + i];
      for (int t = 0; t < n; t++) {
        uint row = uint(first + t);
        win[k] = X[((pc.x_off + row * pc.x_nb1) >> 2) + c];
        float sum = 0.0;
        for (uint i = 0u; i < pc.d_conv; i++) sum += win[i] * W[w + i];
        D[((pc.d_off + row * pc.d_nb1) >> 2) + c] = sum;
        for (uint i = 0u; i < k; i++) win[i] = win[i + 1u];
      }
      for (uint i = 0u; i < k; i++) S[st + i] = win[i];
    }
  }
}
