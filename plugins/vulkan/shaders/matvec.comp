#version 450
// MATMUL for few tokens (decode): dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ, reading the
// quantized blocks directly (WTYPE_*), NT tokens per pass so each weight chunk is decoded once per
// NT tokens. No shared memory and no barriers. Two layouts:
//  ROW_PER_SUBGROUP (GPUs with subgroup arithmetic): one subgroup per output row; lane i decodes
//    the row's 32-element chunks i, i + S, i + 2S, ... (S = the device's subgroup size, read at run
//    time) and one subgroupAdd per token finishes the row, so a subgroup's loads are contiguous.
//  otherwise (CPU devices such as lavapipe, where a subgroup is a SIMD register and every
//    lane-varying load is a scalar load per lane): one invocation per output row. The chunk loop
//    is then uniform, so the x reads are subgroup-uniform (one load, broadcast) and only the
//    weight reads vary per lane.
#define WG 64u
#ifndef NT
#define NT 4u
#endif
#ifdef ROW_PER_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 0) readonly buffer WBuf4 { uvec4 W4[]; };
#define HAVE_W4
layout(std430, binding = 1) readonly buffer XBuf { uint X[]; };
// The same binding, four floats at a time (used when every token row starts 16-byte aligned).
layout(std430, binding = 1) readonly buffer XBuf4 { vec4 X4[]; };
layout(std430, binding = 2) writeonly buffer DBuf { uint D[]; };
layout(push_constant) uniform Push {
  uint w_off, w_nb1;                // bytes; row 0 of this dispatch's window
  uint x_off, x_nb1, x_nb2, x_nb3;  // bytes
  uint d_off, d_nb1, d_nb2, d_nb3;  // bytes; d_off already points at column row_first
  uint ne1, ne2;                    // token index space [ne1, ne2, ne3] of x and dst
  uint n_in, n_rows, n_tok;         // n_rows: output rows of this dispatch
} pc;

#include "dequant.glsl"

// sum[t] += v · x[t][chunk c] for the tile's nt tokens; xw: word index of each token row.
void accumulate(float v[32], uint c, uint xw[NT], uint nt, bool x_vec4, inout float sum[NT]) {
  uint last = min(32u, pc.n_in - c * 32u) - 1u;  // tail chunks of float rows: v[j > last] == 0
  if (x_vec4 && last == 31u) {
    [[unroll]] for (uint t = 0u; t < NT; t++) {
      if (t < nt) {
        uint xb = (xw[t] >> 2) + c * 8u;
        float s = 0.0;
        [[unroll]] for (uint j = 0u; j < 8u; j++)
          s += dot(vec4(v[4u * j], v[4u * j + 1u], v[4u * j + 2u], v[4u * j + 3u]), X4[xb + j]);
        sum[t] += s;
      }
    }
  } else {
    [[unroll]] for (uint t = 0u; t < NT; t++) {
      if (t < nt) {
        uint xb = xw[t] + c * 32u;
        float s = 0.0;
        [[unroll]] for (uint j = 0u; j < 32u; j++) s += v[j] * uintBitsToFloat(X[xb + min(j, last)]);
        sum[t] += s;
      }
    }
  }
}

void main() {
  uint n_chunks = (pc.n_in + 31u) / 32u;
#ifdef ROW_PER_SUBGROUP
  uint lanes = min(gl_SubgroupSize, WG);  // a subgroup larger than the workgroup has WG live lanes
  uint first_chunk = gl_SubgroupInvocationID;
  uint chunk_step = lanes;
  uint rows_per_group = gl_NumSubgroups;
  uint row_in_group = gl_SubgroupID;
#else
  uint first_chunk = 0u;
  uint chunk_step = 1u;
  uint rows_per_group = WG;
  uint row_in_group = gl_LocalInvocationIndex;
#endif
  uint row_step = gl_NumWorkGroups.x * rows_per_group;
  // Every invocation runs the same number of row iterations (rows past the end repeat the last
  // row and skip the store), so the loops below stay uniform.
  uint row_iters = (pc.n_rows + row_step - 1u) / row_step;
  for (uint it = 0u; it < row_iters; it++) {
    uint o_raw = it * row_step + gl_WorkGroupID.x * rows_per_group + row_in_group;
    uint o = min(o_raw, pc.n_rows - 1u);
    uint row = pc.w_off + o * pc.w_nb1;
    for (uint t0 = gl_WorkGroupID.y * NT; t0 < pc.n_tok; t0 += gl_NumWorkGroups.y * NT) {
      uint nt = min(NT, pc.n_tok - t0);
      uint xw[NT];
      bool x_vec4 = true;
      [[unroll]] for (uint t = 0u; t < NT; t++) {
        xw[t] = t < nt ? (pc.x_off + row_offset(t0 + t, pc.ne1, pc.ne2, pc.x_nb1, pc.x_nb2, pc.x_nb3)) >> 2 : 0u;
        x_vec4 = x_vec4 && (xw[t] & 3u) == 0u;
      }
      float sum[NT];
      [[unroll]] for (uint t = 0u; t < NT; t++) sum[t] = 0.0;
      for (uint c = first_chunk; c < n_chunks; c += chunk_step) {
        float v[32];
        decode_chunk(row, c, pc.n_in, v);
        accumulate(v, c, xw, nt, x_vec4, sum);
      }
      [[unroll]] for (uint t = 0u; t < NT; t++) {
        if (t < nt) {
#ifdef ROW_PER_SUBGROUP
          float total = subgroupAdd(sum[t]);
          bool writer = subgroupElect();
#else
          float total = sum[t];
          bool writer = true;
#endif
          if (writer && o_raw < pc.n_rows) {
            uint dw = (pc.d_off + row_offset(t0 + t, pc.ne1, pc.ne2, pc.d_nb1, pc.d_nb2, pc.d_nb3)) >> 2;
            D[dw + o] = floatBitsToUint(total);
          }
        }
      }
    }
  }
}
