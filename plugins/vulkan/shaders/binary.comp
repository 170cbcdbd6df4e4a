#version 450
// ADD (mode 0) and MUL (mode 1): dst = a op b, b the same shape or one row (zero strides).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 1) readonly buffer BBuf { float B[]; };
layout(std430, binding = 2) writeonly buffer DBuf { float D[]; };
#include "rows.glsl"

void main() {
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = a_row(r) >> 2, b = b_row(r) >> 2, d = d_row(r) >> 2;
    for (uint i = gl_GlobalInvocationID.x; i < pc.ne0; i += gl_NumWorkGroups.x * 64u)
      D[d + i] = pc.mode == 0u ? A[a + i] + B[b + i] : A[a + i] * B[b + i];
  }
}
