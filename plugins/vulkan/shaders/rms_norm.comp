#version 450
// RMS_NORM: dst = a / sqrt(mean(a²) + eps) * (b if mode == 1). One workgroup per row.
#define RED_WG 128u
#include "common.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 1) readonly buffer BBuf { float B[]; };
layout(std430, binding = 2) writeonly buffer DBuf { float D[]; };
#include "rows.glsl"

void main() {
  uint lid = gl_LocalInvocationIndex;
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = a_row(r) >> 2, d = d_row(r) >> 2, b = pc.b_off >> 2;
    float s = 0.0;
    for (uint i = lid; i < pc.ne0; i += 128u) s += A[a + i] * A[a + i];
    float inv_rms = 1.0 / sqrt(wg_sum(s) / float(pc.ne0) + pc.f);
    for (uint i = lid; i < pc.ne0; i += 128u) D[d + i] = A[a + i] * inv_rms * (pc.mode == 1u ? B[b + i] : 1.0);
  }
}
