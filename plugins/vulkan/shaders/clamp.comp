#version 450
// CLAMP (ABI 1.11): dst = a below min is min, above max is max; min's bits in mode, max in f.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 2) writeonly buffer DBuf { float D[]; };
#include "rows.glsl"

void main() {
  const float lo = uintBitsToFloat(pc.mode), hi = pc.f;
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = a_row(r) >> 2, d = d_row(r) >> 2;
    for (uint i = gl_GlobalInvocationID.x; i < pc.ne0; i += gl_NumWorkGroups.x * 64u) {
      float x = A[a + i];
      D[d + i] = x < lo ? lo : (x > hi ? hi : x);
    }
  }
}
