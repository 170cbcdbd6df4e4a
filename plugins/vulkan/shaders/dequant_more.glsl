// Weight decoding for the GGML types beyond the common five (included by dequant.glsl, which
// supplies the W accessors and k4_sub_block). Each decode_chunk writes 32 consecutive
// elements of a row: one block for Q4_1 / Q5_0 / Q5_1 / IQ4_NL, one eighth of a 256-element
// super-block for the K-quants and IQ4_XS. Layouts and arithmetic follow ggml's dequantize_row_*.

// Four little-endian bytes at a 2-aligned address as one word.
uint w_u32_at(uint a) { return w_u16(a) | (w_u16(a + 2u) << 16); }

#if defined(WTYPE_IQ4_NL) || defined(WTYPE_IQ4_XS)
// ggml's kvalues_iq4nl: the 16 non-uniform levels of the IQ4 codebook.
const float IQ4_LEVELS[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                       1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
// 16 bytes of nibbles at `a` (2-aligned): element j from the low nibble of byte j, j + 16 from its high.
void iq4_nibbles(uint a, float d, out float v[32]) {
  uint qs[4];
  w_u32x4(a, qs);
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      uint byte = (qs[k] >> (8u * j)) & 0xffu;
      v[4u * k + j] = d * IQ4_LEVELS[byte & 0xfu];
      v[4u * k + j + 16u] = d * IQ4_LEVELS[byte >> 4];
    }
  }
}
#endif

#if defined(WTYPE_Q4_1)
// 20 bytes: d, m (f16), 16 bytes of nibbles; x = q * d + m.
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * 20u;
  float d = w_f16(b), m = w_f16(b + 2u);
  uint qs[4];
  w_u32x4(b + 4u, qs);
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      uint byte = (qs[k] >> (8u * j)) & 0xffu;
      v[4u * k + j] = float(byte & 0xfu) * d + m;
      v[4u * k + j + 16u] = float(byte >> 4) * d + m;
    }
  }
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
// Q5_0, 22 bytes: d, qh (32 fifth bits), 16 bytes of nibbles; x = (q - 16) * d.
// Q5_1, 24 bytes: d, m, qh, nibbles; x = q * d + m.
#if defined(WTYPE_Q5_0)
const uint BLOCK_BYTES = 22u, QH_AT = 2u;
#else
const uint BLOCK_BYTES = 24u, QH_AT = 4u;
#endif
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * BLOCK_BYTES;
  float d = w_f16(b);
#if defined(WTYPE_Q5_0)
  const float offset = -16.0;  // (q - 16) * d, exact in the subtraction as ggml computes it
#else
  const float offset = 0.0;
  float m = w_f16(b + 2u);
#endif
  uint qh = w_u32_at(b + QH_AT);
  uint qs[4];
  w_u32x4(b + QH_AT + 4u, qs);
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      uint i = 4u * k + j;
      uint byte = (qs[k] >> (8u * j)) & 0xffu;
      float lo = float((byte & 0xfu) | (((qh >> i) & 1u) << 4)) + offset;
      float hi = float((byte >> 4) | (((qh >> (i + 16u)) & 1u) << 4)) + offset;
#if defined(WTYPE_Q5_0)
      v[i] = lo * d;
      v[i + 16u] = hi * d;
#else
      v[i] = lo * d + m;
      v[i + 16u] = hi * d + m;
#endif
    }
  }
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_IQ4_NL)
// 18 bytes: d, 16 bytes of codebook indices.
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * 18u;
  iq4_nibbles(b + 2u, w_f16(b), v);
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_MXFP4)
// 17 bytes: an E8M0 exponent, 16 bytes of E2M1 indices (gpt-oss's experts). ggml's levels doubled
// with its "half" scale 2^(e - 128), subnormal for e < 2; blocks are byte-aligned, read byte by byte.
const float MXFP4_LEVELS[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + c * 17u;
  uint e = w_u8(b);
  float d = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
  [[unroll]] for (uint j = 0u; j < 16u; j++) {
    uint q = w_u8(b + 1u + j);
    v[j] = MXFP4_LEVELS[q & 0xfu] * d;
    v[j + 16u] = MXFP4_LEVELS[q >> 4] * d;
  }
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_F8_E4M3_B32)
// 36 bytes: a float scale d, then 32 E4M3 codes (the FP8 checkpoints' layers; LOOM_DTYPE_F8_E4M3_B32):
// code value * d, one rounding, as the CPU decodes it. Blocks are word-aligned (vk_op_validation.cpp).
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint w = (row + c * 36u) >> 2;
  float d = uintBitsToFloat(W[w]);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    uint q = W[w + 1u + k];
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[4u * k + j] = e4m3_to_float((q >> (8u * j)) & 0xffu) * d;
  }
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_IQ4_XS)
// 136 bytes: d, scales_h (2 bits per sub-block), scales_l[4] (4 bits per sub-block), 128 bytes of
// codebook indices; sub-block ib's scale is d * (6-bit scale - 32).
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 136u;
  uint ib = c & 7u;
  uint scales_h = w_u16(b + 2u);
  uint ls = ((w_u8(b + 4u + (ib >> 1)) >> (4u * (ib & 1u))) & 0xfu) | (((scales_h >> (2u * ib)) & 3u) << 4);
  iq4_nibbles(b + 8u + 16u * ib, w_f16(b) * float(int(ls) - 32), v);
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_Q5_K)
// 176 bytes: d, dmin, 12 bytes of 6-bit scales/mins (as Q4_K), qh[32] (bit j: fifth bit of
// sub-block j), qs[128] (sub-blocks 2i and 2i+1 in the low and high nibbles of 32 bytes).
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 176u;
  uint sub = c & 7u;
  float d1, m1;
  k4_sub_block(b, sub, d1, m1);
  uint shift = (sub & 1u) * 4u;
  uint qs[8], qh[8];
  w_u32x8(b + 48u + 32u * (sub >> 1), qs);
  w_u32x8(b + 16u, qh);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      uint q = ((qs[k] >> (8u * j + shift)) & 0xfu) | (((qh[k] >> (8u * j + sub)) & 1u) << 4);
      v[4u * k + j] = d1 * float(q) - m1;
    }
  }
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_Q2_K)
// 84 bytes: scales[16] (low nibble scale, high nibble min, per 16 elements), qs[64] (2 bits),
// d, dmin. Chunk cc is half h = cc / 4 (32 bytes of qs) at bit shift 2 * (cc % 4).
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 84u;
  uint cc = c & 7u;
  uint h = cc >> 2, shift = 2u * (cc & 3u);
  float d = w_f16(b + 80u), dmin = w_f16(b + 82u);
  uint s0 = w_u8(b + 8u * h + 2u * (cc & 3u)), s1 = w_u8(b + 8u * h + 2u * (cc & 3u) + 1u);
  float dl0 = d * float(s0 & 0xfu), ml0 = dmin * float(s0 >> 4);
  float dl1 = d * float(s1 & 0xfu), ml1 = dmin * float(s1 >> 4);
  uint qs[8];
  w_u32x8(b + 16u + 32u * h, qs);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
      float q = float((qs[k] >> (8u * j + shift)) & 3u);
      v[4u * k + j] = k < 4u ? dl0 * q - ml0 : dl1 * q - ml1;
    }
  }
}
#define DECODED_ELSEWHERE
#elif defined(WTYPE_Q3_K)
// 110 bytes: hmask[32] (bit 4h + j of byte l: the high bit, set meaning "no -4"), qs[64] (2 bits),
// 12 bytes of 6-bit scales (low nibbles in bytes 0-7, high pairs in bytes 8-11), d.
int q3_k_scale(uint b, uint k) {
  uint low = k < 8u ? w_u8(b + 96u + k) & 0xfu : w_u8(b + 96u + k - 8u) >> 4;
  uint high = (w_u8(b + 104u + (k & 3u)) >> (2u * (k >> 2))) & 3u;
  return int(low | (high << 4)) - 32;
}
void decode_chunk(uint row, uint c, uint n_in, out float v[32]) {
  uint b = row + (c >> 3) * 110u;
  uint cc = c & 7u;
  uint h = cc >> 2, j = cc & 3u, shift = 2u * j, mbit = 4u * h + j;
  float d = w_f16(b + 108u);
  float dl0 = d * float(q3_k_scale(b, 8u * h + 2u * j)), dl1 = d * float(q3_k_scale(b, 8u * h + 2u * j + 1u));
  uint qs[8], hm[8];
  w_u32x8(b + 32u + 32u * h, qs);
  w_u32x8(b, hm);
  [[unroll]] for (uint k = 0u; k < 8u; k++) {
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
      int q = int((qs[k] >> (8u * i + shift)) & 3u) - (((hm[k] >> (8u * i + mbit)) & 1u) != 0u ? 0 : 4);
      v[4u * k + i] = (k < 4u ? dl0 : dl1) * float(q);
    }
  }
}
#define DECODED_ELSEWHERE
#endif
