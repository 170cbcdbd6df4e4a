#version 450
// STORE_KV: k, v [head_dim, n_kv_heads, n_tok] -> caches [head_dim, n_kv_heads, n_slots] at
// slot_mapping[t] (negative = padding, skipped). Caches are F32, F16 (pairs per word) or INT8_KV
// (f32 scale = absmax/127, then int8 values, four per word). The host guarantees 4-byte aligned
// cache rows and an even (F16) or multiple-of-4 (INT8_KV) head_dim, so no two invocations share a word.
#define RED_WG 64u
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer KBuf { float K[]; };
layout(std430, binding = 1) readonly buffer VBuf { float V[]; };
layout(std430, binding = 2) readonly buffer SBuf { int S[]; };
layout(std430, binding = 3) writeonly buffer KCBuf { uint KC[]; };
layout(std430, binding = 4) writeonly buffer VCBuf { uint VC[]; };
layout(push_constant) uniform Push {
  uint k_off, k_nb1, k_nb2;
  uint v_off, v_nb1, v_nb2;
  uint s_off, s_nb0;
  uint kc_off, kc_nb1, kc_nb2;
  uint vc_off, vc_nb1, vc_nb2;
  uint head_dim, n_kv_heads, n_tok, n_slots, kv_dtype;  // kv_dtype: 0 F32, 1 F16, 1001 INT8_KV
} pc;

const uint DT_F32 = 0u, DT_F16 = 1u;

// Quantizes element i of src row `x` (word index) as the reference does: q = rint(x / scale).
int q8(float x, float inv) { return int(roundEven(clamp(x * inv, -127.0, 127.0))); }

void main() {
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
