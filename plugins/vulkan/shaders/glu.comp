#version 450
// GLU: dst = act(gate) * up, activation in mode.
#include "common.glsl"
#include "activation.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 1) readonly buffer BBuf { float B[]; };
layout(std430, binding = 2) writeonly buffer DBuf { float D[]; };
#include "rows.glsl"

void main() {
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = a_row(r) >> 2, b = b_row(r) >> 2, d = d_row(r) >> 2;
    for (uint i = gl_GlobalInvocationID.x; i < pc.ne0; i += gl_NumWorkGroups.x * 64u)
      D[d + i] = glu_value(pc.mode, A[a + i], B[b + i]);
  }
}
