#version 450
// ROPE over x [head_dim, n_heads, n_tok] with positions [n_tok] (M-RoPE: [n_tok, 4], each pair taking
// its section's component). NORMAL rotates pairs (2i, 2i+1),
// NEOX rotates (i, i + n_dims/2); dims past n_dims pass through. Per-pair inverse frequencies come
// from the host (computed in double like the reference, YaRN's blend included); with has_factors
// each is divided by the pair's frequency factor (G, src2). With USE_FLOAT64 the angle pos * freq
// is formed and reduced mod 2π in double, so long contexts keep full phase precision.
#ifdef USE_FLOAT64
#extension GL_ARB_gpu_shader_fp64 : enable
#endif
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer ABuf { float A[]; };
layout(std430, binding = 1) readonly buffer PBuf { int P[]; };
layout(std430, binding = 2) buffer DBuf { float D[]; };
#ifdef USE_FLOAT64
layout(std430, binding = 3) readonly buffer FBuf { double F[]; };
#else
layout(std430, binding = 3) readonly buffer FBuf { float F[]; };
#endif
layout(std430, binding = 4) readonly buffer GBuf { float G[]; };
layout(push_constant) uniform Push {
  uint a_off, a_nb1, a_nb2;
  uint p_off, p_nb0;
  uint d_off, d_nb1, d_nb2;
  uint head_dim, n_heads, n_tok, n_dims, neox;
  uint g_off, has_factors;
  uint p_nb1, mrope, s0, s1, s2, s3;  // LOOM_ROPE_MROPE: positions [n_tok, 4], pairs by section (mrope 2: interleaved)
} pc;

// The position component pair i turns by (M-RoPE's section of its sector; 0 without sections).
uint component(uint i) {
  if (pc.mrope == 0u) return 0u;
  uint sector = i % (pc.s0 + pc.s1 + pc.s2 + pc.s3);
  if (pc.mrope == 2u) {  // LOOM_ROPE_MROPE_INTERLEAVED: time, height, width in turn while each section lasts
    if (sector % 3u == 1u && sector < 3u * pc.s1) return 1u;
    if (sector % 3u == 2u && sector < 3u * pc.s2) return 2u;
    if (sector % 3u == 0u && sector < 3u * pc.s0) return 0u;
    return 3u;
  }
  if (sector < pc.s0) return 0u;
  if (sector < pc.s0 + pc.s1) return 1u;
  if (sector < pc.s0 + pc.s1 + pc.s2) return 2u;
  return 3u;
}

void main() {
  uint half_dims = pc.n_dims / 2u;
  uint n_rows = pc.n_heads * pc.n_tok;
  for (uint r = gl_WorkGroupID.y; r < n_rows; r += gl_NumWorkGroups.y) {
    uint h = r % pc.n_heads, t = r / pc.n_heads;
    uint a = (pc.a_off + h * pc.a_nb1 + t * pc.a_nb2) >> 2;
    uint d = (pc.d_off + h * pc.d_nb1 + t * pc.d_nb2) >> 2;
    // Pairs first (each invocation owns both elements of its pair, so dst may alias x) ...
    for (uint i = gl_LocalInvocationIndex; i < half_dims; i += 64u) {
      int pos = P[(pc.p_off + t * pc.p_nb0 + component(i) * pc.p_nb1) >> 2];
#ifdef USE_FLOAT64
      const double two_pi = 6.283185307179586476925286766559LF;
      double theta = double(pos) * F[i];
      if (pc.has_factors != 0u) theta /= double(G[(pc.g_off >> 2) + i]);
      float angle = float(theta - two_pi * floor(theta / two_pi));
#else
      float angle = float(pos) * F[i];
      if (pc.has_factors != 0u) angle /= G[(pc.g_off >> 2) + i];
#endif
      float c = cos(angle), s = sin(angle);
      uint i0 = pc.neox != 0u ? i : 2u * i;
      uint i1 = pc.neox != 0u ? i + half_dims : 2u * i + 1u;
      float x0 = A[a + i0], x1 = A[a + i1];
      D[d + i0] = x0 * c - x1 * s;
      D[d + i1] = x0 * s + x1 * c;
    }
    // ... then the pass-through tail.
    for (uint i = pc.n_dims + gl_LocalInvocationIndex; i < pc.head_dim; i += 64u) D[d + i] = A[a + i];
  }
}
