// Weight decoding, shared by MATMUL and GET_ROWS. Requires `W` (uint[]) declared at binding 0 and
// exactly one WTYPE_* define. A row is decoded in chunks of 32 consecutive elements: one block for
// Q4_0 / Q8_0, one eighth of a super-block for Q4_K / Q6_K, 32 plain values otherwise.
// Block layouts are GGML's (core/include/loom/dtype.h); arithmetic follows the CPU reference order.

uint w_u8(uint a) { return (W[a >> 2] >> ((a & 3u) << 3)) & 0xffu; }
uint w_u16(uint a) { return (W[a >> 2] >> ((a & 2u) << 3)) & 0xffffu; }  // a even
// Four bytes at a 2-aligned address (blocks of 18, 34 and 210 bytes are only 2-aligned).
uint w_u32(uint a) {
  uint i = a >> 2;
  return (a & 2u) == 0u ? W[i] : (W[i] >> 16) | (W[i + 1u] << 16);
}
float w_f16(uint a) { return half_to_float(w_u16(a)); }

#if defined(WTYPE_Q4_0)
const uint CHUNK_BYTES = 18u;  // one block
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * 18u;
  float d = w_f16(b);
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    uint q = w_u32(b + 2u + 4u * k);
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
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint q = w_u32(b + 2u + 4u * k);
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[4u * k + j] = float(int(q << (24u - 8u * j)) >> 24) * d;
  }
}
#elif defined(WTYPE_Q4_K)
// 144-byte super-block: d, dmin (f16), 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles.
void scale_min_k4(uint b, uint j, out uint sc, out uint m) {
  if (j < 4u) {
    sc = w_u8(b + 4u + j) & 63u;
    m = w_u8(b + 8u + j) & 63u;
  } else {
    sc = (w_u8(b + 8u + j) & 0xfu) | ((w_u8(b + j) >> 6) << 4);
    m = (w_u8(b + 8u + j) >> 4) | ((w_u8(b + 4u + j) >> 6) << 4);
  }
}
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 144u;
  uint sub = c & 7u;
  uint sc, m;
  scale_min_k4(b, sub, sc, m);
  float d1 = w_f16(b) * float(sc);
  float m1 = w_f16(b + 2u) * float(m);
  uint qb = b + 16u + 32u * (sub >> 1);
  uint shift = (sub & 1u) * 4u;
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint q = w_u32(qb + 4u * k);
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
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint lo = w_u32(ql + 4u * k);
    uint hi = w_u32(qh + 4u * k);
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
