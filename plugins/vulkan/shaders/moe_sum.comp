#version 450
// MOE_SUM (ABI 1.5): dst[:, t] = sum_j weights[j, t] * src[:, j, t].
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer SBuf { float S[]; };
layout(std430, binding = 1) readonly buffer WBuf { float Wt[]; };
layout(std430, binding = 2) writeonly buffer DBuf { float D[]; };
layout(push_constant) uniform Push {
  uint s_off, s_nb1, s_nb2, w_off, w_nb1, d_off, d_nb1;
  uint ne0, n_used, n_tok;
} pc;

void main() {
  for (uint t = gl_WorkGroupID.y; t < pc.n_tok; t += gl_NumWorkGroups.y) {
    uint w = (pc.w_off + t * pc.w_nb1) >> 2, d = (pc.d_off + t * pc.d_nb1) >> 2;
    for (uint i = gl_GlobalInvocationID.x; i < pc.ne0; i += gl_NumWorkGroups.x * 64u) {
      float sum = 0.0;
      for (uint j = 0u; j < pc.n_used; j++) sum += Wt[w + j] * S[((pc.s_off + j * pc.s_nb1 + t * pc.s_nb2) >> 2) + i];
      D[d + i] = sum;
    }
  }
}
