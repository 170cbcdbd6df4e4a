#version 450
// SOFTMAX over each row. One workgroup per row.
#define RED_WG 128u
#include "common.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 2) buffer DBuf { float D[]; };
#include "rows.glsl"

void main() {
  uint lid = gl_LocalInvocationIndex;
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = a_row(r) >> 2, d = d_row(r) >> 2;
    float m = uintBitsToFloat(0xff800000u);  // -inf
    for (uint i = lid; i < pc.ne0; i += 128u) m = max(m, A[a + i]);
    m = wg_max(m);
    float s = 0.0;
    for (uint i = lid; i < pc.ne0; i += 128u) s += exp(A[a + i] - m);
    float inv = 1.0 / wg_sum(s);
    for (uint i = lid; i < pc.ne0; i += 128u) D[d + i] = exp(A[a + i] - m) * inv;
  }
}
