#version 450
// MATMUL: dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ, W of any weight type (WTYPE_*).
// One workgroup per (output row, tile of NT tokens): each weight chunk is decoded once into
// registers and reused for every token of the tile, so prefill reads W n_tok/NT times, decode once.
#define WG 32u
#define RED_WG 32u
#define NT 8u
#include "common.glsl"

layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 1) readonly buffer XBuf { uint X[]; };
layout(std430, binding = 2) writeonly buffer DBuf { uint D[]; };
layout(push_constant) uniform Push {
  uint w_off, w_nb1;                // bytes; row 0 of this dispatch's window
  uint x_off, x_nb1, x_nb2, x_nb3;  // bytes
  uint d_off, d_nb1, d_nb2, d_nb3;  // bytes; d_off already points at column row_first
  uint ne1, ne2;                    // token index space [ne1, ne2, ne3] of x and dst
  uint n_in, n_rows, n_tok;         // n_rows: output rows of this dispatch
} pc;

#include "dequant.glsl"

void main() {
  uint lid = gl_LocalInvocationIndex;
  uint n_chunks = (pc.n_in + 31u) / 32u;
  for (uint o = gl_WorkGroupID.x; o < pc.n_rows; o += gl_NumWorkGroups.x) {
    uint row = pc.w_off + o * pc.w_nb1;
    for (uint t0 = gl_WorkGroupID.y * NT; t0 < pc.n_tok; t0 += gl_NumWorkGroups.y * NT) {
      uint nt = min(NT, pc.n_tok - t0);
      uint xw[NT];
      [[unroll]] for (uint t = 0u; t < NT; t++)
        xw[t] = t < nt ? (pc.x_off + row_offset(t0 + t, pc.ne1, pc.ne2, pc.x_nb1, pc.x_nb2, pc.x_nb3)) >> 2 : 0u;
      // Every array index below is a compile-time constant (unrolled loops with guards), so the
      // arrays live in registers; dynamic indexing would spill them to scratch memory.
      float sum[NT];
      [[unroll]] for (uint t = 0u; t < NT; t++) sum[t] = 0.0;
      for (uint c = lid; c < n_chunks; c += WG) {
        float v[32];
        decode_chunk(row, c, pc.n_in, v);
        uint last = min(32u, pc.n_in - c * 32u) - 1u;  // tail chunks of float rows: v[j > last] == 0
        [[unroll]] for (uint t = 0u; t < NT; t++) {
          if (t < nt) {
            uint xb = xw[t] + c * 32u;
            float s = 0.0;
            [[unroll]] for (uint j = 0u; j < 32u; j++) s += v[j] * uintBitsToFloat(X[xb + min(j, last)]);
            sum[t] += s;
          }
        }
      }
      [[unroll]] for (uint t = 0u; t < NT; t++) {
        if (t < nt) {
          float total = wg_sum(sum[t]);
          if (lid == 0u) {
            uint dw = (pc.d_off + row_offset(t0 + t, pc.ne1, pc.ne2, pc.d_nb1, pc.d_nb2, pc.d_nb3)) >> 2;
            D[dw + o] = floatBitsToUint(total);
          }
        }
      }
    }
  }
}
