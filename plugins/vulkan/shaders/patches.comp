#version 450
// PATCHES (ABI 1.9): image [width, height, channels] -> rows of p * p * channels, one per patch
// (px + py * grid_w), element kx + p * (ky + p * c) = image[px * p + kx, py * p + ky, c]. One invocation
// per element of a row; workgroups walk the patches.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer IBuf { float I[]; };
layout(std430, binding = 1) writeonly buffer DBuf { float D[]; };
layout(push_constant) uniform Push {
  uint i_off, i_nb1, i_nb2;
  uint d_off, d_nb1;
  uint p, channels, grid_w, n_patches;
} pc;

void main() {
  uint row = pc.p * pc.p * pc.channels;
  for (uint pi = gl_WorkGroupID.y; pi < pc.n_patches; pi += gl_NumWorkGroups.y) {
    uint px = pi % pc.grid_w, py = pi / pc.grid_w;
    uint d = (pc.d_off + pi * pc.d_nb1) >> 2;
    for (uint e = gl_GlobalInvocationID.x; e < row; e += gl_NumWorkGroups.x * 64u) {
      uint kx = e % pc.p, ky = (e / pc.p) % pc.p, c = e / (pc.p * pc.p);
      D[d + e] = I[((pc.i_off + (py * pc.p + ky) * pc.i_nb1 + c * pc.i_nb2) >> 2) + px * pc.p + kx];
    }
  }
}
