// Weight decoding, shared by MATMUL and GET_ROWS. Requires `W` (uint[]) declared at binding 0 and
// exactly one WTYPE_* define. A row is decoded in chunks of 32 consecutive elements: one block for
// Q4_0 / Q8_0, one eighth of a super-block for Q4_K / Q6_K, 32 plain values otherwise; the other
// GGML types are in dequant_more.glsl.
// Block layouts are GGML's (core/include/loom/dtype.h); arithmetic follows the CPU reference order.

uint w_u8(uint a) { return (W[a >> 2] >> ((a & 3u) << 3)) & 0xffu; }
uint w_u16(uint a) { return (W[a >> 2] >> ((a & 2u) << 3)) & 0xffffu; }  // a even
float w_f16(uint a) { return half_to_float(w_u16(a)); }
// Eight consecutive words at a 2-aligned address: eight aligned loads, or nine and funnel shifts,
// rather than two loads per word. (Loads cost far more than shifts on CPU Vulkan devices.)
void w_u32x8(uint a, out uint q[8]) {
  uint i = a >> 2;
  if ((a & 2u) == 0u) {
    [[unroll]] for (uint k = 0u; k < 8u; k++) q[k] = W[i + k];
  } else {
    uint prev = W[i];
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
      uint next = W[i + k + 1u];
      q[k] = (prev >> 16) | (next << 16);
      prev = next;
    }
  }
}
void w_u32x4(uint a, out uint q[4]) {
  uint i = a >> 2;
  if ((a & 2u) == 0u) {
    [[unroll]] for (uint k = 0u; k < 4u; k++) q[k] = W[i + k];
  } else {
    uint prev = W[i];
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
      uint next = W[i + k + 1u];
      q[k] = (prev >> 16) | (next << 16);
      prev = next;
    }
  }
}

// Byte k of a Q4_K / Q5_K super-block's 16-byte header (d, dmin, scales), held in four words, and
// sub-block j's 6-bit scale and min from it.
uint header_u8(uint hdr[4], uint k) { return (hdr[k >> 2] >> ((k & 3u) << 3)) & 0xffu; }
void scale_min_k4(uint hdr[4], uint j, out uint sc, out uint m) {
  if (j < 4u) {
    sc = header_u8(hdr, 4u + j) & 63u;
    m = header_u8(hdr, 8u + j) & 63u;
  } else {
    sc = (header_u8(hdr, 8u + j) & 0xfu) | ((header_u8(hdr, j) >> 6) << 4);
    m = (header_u8(hdr, 8u + j) >> 4) | ((header_u8(hdr, 4u + j) >> 6) << 4);
  }
}
// Sub-block `sub` of the Q4_K / Q5_K super-block at byte b: x = d1 * q - m1.
void k4_sub_block(uint b, uint sub, out float d1, out float m1) {
  uint hdr[4];
  w_u32x4(b, hdr);
  uint sc, m;
  scale_min_k4(hdr, sub, sc, m);
  d1 = half_to_float(hdr[0] & 0xffffu) * float(sc);
  m1 = half_to_float(hdr[0] >> 16) * float(m);
}

#include "dequant_more.glsl"

#if defined(DECODED_ELSEWHERE)
#elif defined(WTYPE_Q4_0)
const uint CHUNK_BYTES = 18u;  // one block
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * 18u;
  float d = w_f16(b);
  uint qs[4];
  w_u32x4(b + 2u, qs);
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    uint q = qs[k];
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      uint byte = (q >> (8u * j)) & 0xffu;
      v[4u * k + j] = float(int(byte & 0xfu) - 8) * d;
      v[4u * k + j + 16u] = float(int(byte >> 4) - 8) * d;
    }
  }
}
#elif defined(WTYPE_Q8_0)
const uint CHUNK_BYTES = 34u;
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * 34u;
  float d = w_f16(b);
  uint qs[8];
  w_u32x8(b + 2u, qs);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint q = qs[k];
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[4u * k + j] = float(int(q << (24u - 8u * j)) >> 24) * d;
  }
}
#elif defined(WTYPE_Q4_K)
// 144-byte super-block: d, dmin (f16), 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles.
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 144u;
  uint sub = c & 7u;
  float d1, m1;
  k4_sub_block(b, sub, d1, m1);
  uint qb = b + 16u + 32u * (sub >> 1);
  uint shift = (sub & 1u) * 4u;
  uint qs[8];
  w_u32x8(qb, qs);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint q = qs[k];
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[4u * k + j] = d1 * float((q >> (8u * j + shift)) & 0xfu) - m1;
  }
}
#elif defined(WTYPE_Q6_K)
// 210-byte super-block: ql[128], qh[64], int8 scales[16], d (f16). Chunk cc of a block is half
// h = cc/4 (128 values) and group g = cc%4 within it (values l + 32g, l < 32).
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 210u;
  uint cc = c & 7u;
  uint h = cc >> 2, g = cc & 3u;
  float d = w_f16(b + 208u);
  uint ql = b + 64u * h + ((g & 1u) != 0u ? 32u : 0u);
  uint qh = b + 128u + 32u * h;
  uint ql_shift = g >= 2u ? 4u : 0u;
  uint qh_shift = 2u * g;
  float s0 = d * float(int(w_u8(b + 192u + 8u * h + 2u * g) << 24) >> 24);
  float s1 = d * float(int(w_u8(b + 192u + 8u * h + 2u * g + 1u) << 24) >> 24);
  uint los[8], his[8];
  w_u32x8(ql, los);
  w_u32x8(qh, his);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint lo = los[k];
    uint hi = his[k];
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      int q = int(((lo >> (8u * j + ql_shift)) & 0xfu) | (((hi >> (8u * j + qh_shift)) & 3u) << 4)) - 32;
      v[4u * k + j] = (4u * k + j < 16u ? s0 : s1) * float(q);
    }
  }
}
#elif defined(WTYPE_F32)
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint base = (row >> 2) + c * 32u;
  uint n = min(32u, n_in - c * 32u);
#ifdef HAVE_W4
  if (n == 32u && (base & 3u) == 0u) {
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
      uvec4 q = W4[(base >> 2) + k];
      v[4u * k] = uintBitsToFloat(q.x);
      v[4u * k + 1u] = uintBitsToFloat(q.y);
      v[4u * k + 2u] = uintBitsToFloat(q.z);
      v[4u * k + 3u] = uintBitsToFloat(q.w);
    }
    return;
  }
#endif
  [[unroll]] for (uint j = 0u; j < 32u; j++) v[j] = j < n ? uintBitsToFloat(W[base + j]) : 0.0;
}
#elif defined(WTYPE_F16)
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint base = row + c * 64u;
  uint n = min(32u, n_in - c * 32u);
  [[unroll]] for (uint j = 0u; j < 32u; j++) v[j] = j < n ? half_to_float(w_u16(base + 2u * j)) : 0.0;
}
#elif defined(WTYPE_BF16)
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint base = row + c * 64u;
  uint n = min(32u, n_in - c * 32u);
  [[unroll]] for (uint j = 0u; j < 32u; j++) v[j] = j < n ? bf16_to_float(w_u16(base + 2u * j)) : 0.0;
}
#else
#error "define one WTYPE_*"
#endif
