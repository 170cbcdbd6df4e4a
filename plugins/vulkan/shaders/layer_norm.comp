#version 450
// LAYER_NORM (ABI 1.9): dst = (a - mean) / sqrt(var + eps) * w + b, w and b optional (mode bit 0, bit 1),
// the variance from the centred values (as the reference). One workgroup per row.
#define RED_WG 128u
#include "common.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 1) readonly buffer WBuf { float W[]; };
layout(std430, binding = 2) writeonly buffer DBuf { float D[]; };
layout(std430, binding = 3) readonly buffer BBuf { float B[]; };
layout(push_constant) uniform Push {
  uint a_off, a_nb1, a_nb2, a_nb3;
  uint w_off, b_off;
  uint d_off, d_nb1, d_nb2, d_nb3;
  uint ne0, ne1, ne2, n_rows;
  uint mode;
  float eps;
} pc;

void main() {
  uint lid = gl_LocalInvocationIndex;
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = (pc.a_off + row_offset(r, pc.ne1, pc.ne2, pc.a_nb1, pc.a_nb2, pc.a_nb3)) >> 2;
    uint d = (pc.d_off + row_offset(r, pc.ne1, pc.ne2, pc.d_nb1, pc.d_nb2, pc.d_nb3)) >> 2;
    float s = 0.0;
    for (uint i = lid; i < pc.ne0; i += 128u) s += A[a + i];
    float mean = wg_sum(s) / float(pc.ne0);
    float v = 0.0;
    for (uint i = lid; i < pc.ne0; i += 128u) v += (A[a + i] - mean) * (A[a + i] - mean);
    float inv_std = 1.0 / sqrt(wg_sum(v) / float(pc.ne0) + pc.eps);
    for (uint i = lid; i < pc.ne0; i += 128u) {
      float y = (A[a + i] - mean) * inv_std;
      if ((pc.mode & 1u) != 0u) y *= W[(pc.w_off >> 2) + i];
      if ((pc.mode & 2u) != 0u) y += B[(pc.b_off >> 2) + i];
      D[d + i] = y;
    }
  }
}
