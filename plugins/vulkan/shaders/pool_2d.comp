#version 450
// POOL_2D (ABI 1.9): the mean of each k x k window of a grid of rows, src [channels, width, height] ->
// dst [channels, width / k, height / k], summed in window order (y, then x) as the reference.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer XBuf { float X[]; };
layout(std430, binding = 1) writeonly buffer DBuf { float D[]; };
layout(push_constant) uniform Push {
  uint x_off, x_nb1, x_nb2;
  uint d_off, d_nb1, d_nb2;
  uint channels, out_w, n_cells, k;
} pc;

void main() {
  float inv = 1.0 / float(pc.k * pc.k);
  for (uint cell = gl_WorkGroupID.y; cell < pc.n_cells; cell += gl_NumWorkGroups.y) {
    uint i = cell % pc.out_w, j = cell / pc.out_w;
    uint d = (pc.d_off + i * pc.d_nb1 + j * pc.d_nb2) >> 2;
    for (uint c = gl_GlobalInvocationID.x; c < pc.channels; c += gl_NumWorkGroups.x * 64u) {
      float sum = 0.0;
      for (uint dy = 0u; dy < pc.k; dy++)
        for (uint dx = 0u; dx < pc.k; dx++) sum += X[((pc.x_off + (pc.k * i + dx) * pc.x_nb1 + (pc.k * j + dy) * pc.x_nb2) >> 2) + c];
      D[d + c] = sum * inv;
    }
  }
}
