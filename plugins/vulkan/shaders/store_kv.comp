#version 450
// STORE_KV: k, v [head_dim, n_kv_heads, n_tok] -> caches [head_dim, n_kv_heads, n_slots] at
// slot_mapping[t] (negative = padding, skipped). Caches are F32, F16 (pairs per word), INT8_KV
// (f32 scale = absmax/127, then int8 values, four per word), F8_E4M3 (four bytes per word), or ggml's
// Q8_0 / Q4_0 blocks (one f16 scale per 32 values; see store_blocks). For the others the host
// guarantees 4-byte aligned cache rows and an even (F16) or multiple-of-4 (INT8_KV, F8_E4M3) head_dim,
// so no two invocations share a word.
#define RED_WG 64u
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer KBuf { float K[]; };
layout(std430, binding = 1) readonly buffer VBuf { float V[]; };
layout(std430, binding = 2) readonly buffer SBuf { int S[]; };
// Not writeonly: a block cache's boundary half-words are written with atomics (put_block).
layout(std430, binding = 3) buffer KCBuf { uint KC[]; };
layout(std430, binding = 4) buffer VCBuf { uint VC[]; };
layout(push_constant) uniform Push {
  uint k_off, k_nb1, k_nb2;
  uint v_off, v_nb1, v_nb2;
  uint s_off, s_nb0;
  uint kc_off, kc_nb1, kc_nb2;
  uint vc_off, vc_nb1, vc_nb2;
  uint head_dim, n_kv_heads, n_tok, n_slots, kv_dtype;  // kv_dtype: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 1001 INT8_KV, 1004 F8_E4M3
} pc;

const uint DT_F32 = 0u, DT_F16 = 1u, DT_Q4_0 = 2u, DT_Q8_0 = 8u, DT_F8_E4M3 = 1004u;

// Quantizes element i of src row `x` (word index) as the reference does: q = rint(x / scale).
int q8(float x, float inv) { return int(roundEven(clamp(x * inv, -127.0, 127.0))); }

// Q8_0 as the CPU backend writes it (ggml's reference quantizer): d = amax / 127, q = rint(x / d).
// Out: the block's 17 half-words (d, then the int8 values in pairs).
void quantize_q8_0(float x[32], out uint hw[17]) {
  float amax = 0.0;
  [[unroll]] for (uint j = 0u; j < 32u; j++) amax = max(amax, abs(x[j]));
  // precise: else the compiler may fold 1 / (amax / 127) into 127 / amax, which rounds differently
  // from the CPU's and moves the odd x / d that lands near a tie by one step.
  precise float d = amax / 127.0;
  precise float inv = d > 0.0 ? 1.0 / d : 0.0;
  hw[0] = float_to_half(d);
  [[unroll]] for (uint j = 0u; j < 16u; j++) {
    precise float lo_x = x[2u * j] * inv, hi_x = x[2u * j + 1u] * inv;
    uint lo = uint(int(roundEven(lo_x))) & 0xffu;
    uint hi = uint(int(roundEven(hi_x))) & 0xffu;
    hw[1u + j] = lo | (hi << 8);
  }
}

// Q4_0 likewise: d = (the value of largest magnitude) / -8, nibble = min(15, trunc(x / d + 8.5)); value
// j in the low nibble of byte j, value j + 16 in its high nibble. Out: 9 half-words (hw[9..16] unused).
uint q4(float x, float inv) {
  precise float t = x * inv + 8.5;  // no fused multiply-add: the CPU rounds the product first
  return uint(clamp(t, 0.0, 15.0));
}
void quantize_q4_0(float x[32], out uint hw[17]) {
  float amax = 0.0, signed_max = 0.0;
  [[unroll]] for (uint j = 0u; j < 32u; j++) {
    if (abs(x[j]) > amax) {
      amax = abs(x[j]);
      signed_max = x[j];
    }
  }
  precise float d = signed_max / -8.0;  // precise: as in quantize_q8_0
  precise float inv = d != 0.0 ? 1.0 / d : 0.0;
  hw[0] = float_to_half(d);
  [[unroll]] for (uint j = 0u; j < 8u; j++) {
    uint b0 = q4(x[2u * j], inv) | (q4(x[2u * j + 16u], inv) << 4);
    uint b1 = q4(x[2u * j + 1u], inv) | (q4(x[2u * j + 17u], inv) << 4);
    hw[1u + j] = b0 | (b1 << 8);
  }
  [[unroll]] for (uint j = 9u; j < 17u; j++) hw[j] = 0u;
}

void put_word(bool to_k, uint w, uint bits) {
  if (to_k) KC[w] = bits;
  else VC[w] = bits;
}
// Only the 16 bits at `shift` of word w: the other half belongs to the neighbouring block (perhaps
// another invocation's) or to bytes outside the cache view. Clearing then setting one's own bits
// with two atomics is enough, since no one else touches them.
void put_half(bool to_k, uint w, uint shift, uint bits) {
  uint keep = ~(0xffffu << shift);
  if (to_k) {
    atomicAnd(KC[w], keep);
    atomicOr(KC[w], bits << shift);
  } else {
    atomicAnd(VC[w], keep);
    atomicOr(VC[w], bits << shift);
  }
}
// Writes a block of n half-words (n odd: 17 for Q8_0, 9 for Q4_0) at the 2-aligned byte address a:
// whole words plainly, and the one half-word that shares a word with a neighbour (the last when
// a % 4 == 0, the first when a % 4 == 2) through put_half.
void put_block(bool to_k, uint a, uint hw[17], uint n) {
  uint w = a >> 2;
  if ((a & 2u) == 0u) {
    for (uint i = 0u; i + 1u < n; i += 2u) put_word(to_k, w + i / 2u, hw[i] | (hw[i + 1u] << 16));
    put_half(to_k, w + n / 2u, 0u, hw[n - 1u]);
  } else {
    put_half(to_k, w, 16u, hw[0]);
    for (uint i = 1u; i < n; i += 2u) put_word(to_k, w + (i + 1u) / 2u, hw[i] | (hw[i + 1u] << 16));
  }
}

// Q8_0 / Q4_0 caches: one invocation per block of 32 values (of one K or V row), 64 blocks per
// workgroup pass. Blocks are 34 or 18 bytes, so rows are only 2-byte aligned (head_dim 96 gives
// 102-byte Q8_0 rows) and a word can straddle two blocks: see put_block.
void store_blocks() {
  uint nb = pc.head_dim / 32u;  // blocks per row (the host refuses head_dim % 32 != 0)
  uint block_bytes = pc.kv_dtype == DT_Q8_0 ? 34u : 18u;
  uint n_items = pc.n_kv_heads * pc.n_tok * 2u * nb;
  for (uint item = gl_WorkGroupID.y * 64u + gl_LocalInvocationIndex; item < n_items; item += gl_NumWorkGroups.y * 64u) {
    uint b = item % nb, r = item / (2u * nb);
    bool to_k = ((item / nb) & 1u) == 0u;
    uint h = r % pc.n_kv_heads, t = r / pc.n_kv_heads;
    int slot = S[(pc.s_off + t * pc.s_nb0) >> 2];
    if (slot < 0) continue;
    if (uint(slot) >= pc.n_slots) {
      if (h == 0u && item % (2u * nb) == 0u) report_error(ERR_SLOT, uint(slot));
      continue;
    }
    float x[32];
    if (to_k) {
      uint src = ((pc.k_off + h * pc.k_nb1 + t * pc.k_nb2) >> 2) + 32u * b;
      [[unroll]] for (uint j = 0u; j < 32u; j++) x[j] = K[src + j];
    } else {
      uint src = ((pc.v_off + h * pc.v_nb1 + t * pc.v_nb2) >> 2) + 32u * b;
      [[unroll]] for (uint j = 0u; j < 32u; j++) x[j] = V[src + j];
    }
    uint hw[17];
    if (pc.kv_dtype == DT_Q8_0) quantize_q8_0(x, hw);
    else quantize_q4_0(x, hw);
    uint row = to_k ? pc.kc_off + h * pc.kc_nb1 + uint(slot) * pc.kc_nb2 : pc.vc_off + h * pc.vc_nb1 + uint(slot) * pc.vc_nb2;
    put_block(to_k, row + b * block_bytes, hw, pc.kv_dtype == DT_Q8_0 ? 17u : 9u);
  }
}

void main() {
  if (pc.kv_dtype == DT_Q8_0 || pc.kv_dtype == DT_Q4_0) {  // uniform: no barrier is skipped by some only
    store_blocks();
    return;
  }
  uint lid = gl_LocalInvocationIndex;
  uint n_rows = pc.n_kv_heads * pc.n_tok;
  for (uint r = gl_WorkGroupID.y; r < n_rows; r += gl_NumWorkGroups.y) {
    uint h = r % pc.n_kv_heads, t = r / pc.n_kv_heads;
    int slot = S[(pc.s_off + t * pc.s_nb0) >> 2];
    if (slot < 0) continue;
    if (uint(slot) >= pc.n_slots) {
      if (lid == 0u && h == 0u) report_error(ERR_SLOT, uint(slot));
      continue;
    }
    uint k = (pc.k_off + h * pc.k_nb1 + t * pc.k_nb2) >> 2;
    uint v = (pc.v_off + h * pc.v_nb1 + t * pc.v_nb2) >> 2;
    uint kc = (pc.kc_off + h * pc.kc_nb1 + uint(slot) * pc.kc_nb2) >> 2;
    uint vc = (pc.vc_off + h * pc.vc_nb1 + uint(slot) * pc.vc_nb2) >> 2;
    if (pc.kv_dtype == DT_F32) {
      for (uint i = lid; i < pc.head_dim; i += 64u) {
        KC[kc + i] = floatBitsToUint(K[k + i]);
        VC[vc + i] = floatBitsToUint(V[v + i]);
      }
    } else if (pc.kv_dtype == DT_F16) {
      for (uint i = lid; i < pc.head_dim / 2u; i += 64u) {
        KC[kc + i] = float_to_half(K[k + 2u * i]) | (float_to_half(K[k + 2u * i + 1u]) << 16);
        VC[vc + i] = float_to_half(V[v + 2u * i]) | (float_to_half(V[v + 2u * i + 1u]) << 16);
      }
    } else if (pc.kv_dtype == DT_F8_E4M3) {
      for (uint i = lid; i < pc.head_dim / 4u; i += 64u) {
        uint kw = 0u, vw = 0u;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
          kw |= float_to_e4m3(K[k + 4u * i + j]) << (8u * j);
          vw |= float_to_e4m3(V[v + 4u * i + j]) << (8u * j);
        }
        KC[kc + i] = kw;
        VC[vc + i] = vw;
      }
    } else {
      float k_max = 0.0, v_max = 0.0;
      for (uint i = lid; i < pc.head_dim; i += 64u) {
        k_max = max(k_max, abs(K[k + i]));
        v_max = max(v_max, abs(V[v + i]));
      }
      float k_scale = wg_max(k_max) / 127.0, v_scale = wg_max(v_max) / 127.0;
      float k_inv = k_scale > 0.0 ? 1.0 / k_scale : 0.0, v_inv = v_scale > 0.0 ? 1.0 / v_scale : 0.0;
      if (lid == 0u) {
        KC[kc] = floatBitsToUint(k_scale);
        VC[vc] = floatBitsToUint(v_scale);
      }
      for (uint i = lid; i < pc.head_dim / 4u; i += 64u) {
        uint kw = 0u, vw = 0u;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
          kw |= (uint(q8(K[k + 4u * i + j], k_inv)) & 0xffu) << (8u * j);
          vw |= (uint(q8(V[v + 4u * i + j], v_inv)) & 0xffu) << (8u * j);
        }
        KC[kc + 1u + i] = kw;
        VC[vc + 1u + i] = vw;
      }
    }
  }
}
