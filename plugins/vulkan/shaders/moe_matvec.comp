#version 450
// MOE_MATMUL (ABI 1.5): for each (slot j, token t), dst[:, j, t] = x[:, j or 0, t] · W[ids[j, t]]ᵀ
// (+ bias[:, ids[j, t]]), W [n_in, n_out, n_expert] of one WTYPE_*. One invocation per output row, one
// workgroup row per (slot, token) pair; an expert id outside 0..n_expert-1 is reported, not read.
#define WG 64u
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 1) readonly buffer XBuf { float X[]; };
layout(std430, binding = 2) readonly buffer IBuf { int I[]; };
layout(std430, binding = 3) readonly buffer BBuf { float Bias[]; };
layout(std430, binding = 4) writeonly buffer DBuf { float D[]; };
layout(push_constant) uniform Push {
  uint w_off, w_nb1, w_nb2;
  uint x_off, x_nb1, x_nb2;
  uint i_off, i_nb1;
  uint b_off, b_nb1;
  uint d_off, d_nb1, d_nb2;
  uint n_in, n_out, n_used, n_tok, n_expert, x_shared, has_bias;
} pc;

#include "dequant.glsl"

void main() {
  uint n_chunks = (pc.n_in + 31u) / 32u;
  for (uint pair = gl_WorkGroupID.y; pair < pc.n_used * pc.n_tok; pair += gl_NumWorkGroups.y) {
    uint j = pair % pc.n_used, t = pair / pc.n_used;
    int e = I[((pc.i_off + t * pc.i_nb1) >> 2) + j];
    if (e < 0 || uint(e) >= pc.n_expert) {
      if (gl_LocalInvocationIndex == 0u) report_error(ERR_EXPERT, uint(e));
      continue;
    }
    uint x = (pc.x_off + (pc.x_shared != 0u ? 0u : j) * pc.x_nb1 + t * pc.x_nb2) >> 2;
    for (uint o = gl_GlobalInvocationID.x; o < pc.n_out; o += gl_NumWorkGroups.x * WG) {
      uint row = pc.w_off + uint(e) * pc.w_nb2 + o * pc.w_nb1;
      float sum = 0.0;
      for (uint c = 0u; c < n_chunks; c++) {
        float v[32];
        decode_chunk(row, c, pc.n_in, v);
        uint last = min(32u, pc.n_in - c * 32u) - 1u;
        for (uint k = 0u; k < 32u; k++) sum += v[k] * X[x + c * 32u + min(k, last)];
      }
      if (pc.has_bias != 0u) sum += Bias[((pc.b_off + uint(e) * pc.b_nb1) >> 2) + o];
      D[((pc.d_off + j * pc.d_nb1 + t * pc.d_nb2) >> 2) + o] = sum;
    }
  }
}
