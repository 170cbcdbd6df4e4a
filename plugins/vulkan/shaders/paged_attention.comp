#version 450
// PAGED_ATTENTION: causal attention of q [head_dim, n_heads, n_tok] over the paged K/V caches,
// prefill and decode alike. One workgroup per (query row, head). Keys are visited in tiles of 64
// (one key per invocation for the score), with an online softmax: running max m, running sum l and
// the output accumulator rescaled by exp(m_old - m_new) per tile; each invocation owns output
// dimensions lid, lid + 64, ... (head_dim <= MAX_D). GQA: head h reads kv head h / (n_heads / n_kv_heads).
// Optional sinks (gpt-oss): one more softmax term per head without a value.
// flags (ABI 1.9): bit 0, column 3 of seqs holds LOOM_SEQ_NON_CAUSAL (the rows see keys up to ctx_len - 1);
// bit 1, ATTENTION over plain tensors: seqs has two columns (first row, rows), a sequence's keys are
// its own rows of the K/V tensors (no block table), causal only with bit 2.
// ABI 1.14, dense mode only: bit 3, a symmetric window (row i sees rows j with |i - j| <= sliding_window / 2);
// bit 4, ALiBi, its max bias carried in bt_off as float bits (dense mode reads no block table, and the
// push constants are full at 128 bytes).
// Caches: F32, F16, INT8_KV (one f32 scale per row), F8_E4M3 (one byte per value), or ggml's Q8_0 / Q4_0 blocks (one f16 scale per 32
// values, 34 / 18 bytes, so rows are only 2-byte aligned and are read through kc_u16 / vc_u16 / *_word).
#define RED_WG 64u
#define MAX_D 512u
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer QBuf { float Q[]; };
layout(std430, binding = 1) readonly buffer KBuf { uint KC[]; };
layout(std430, binding = 2) readonly buffer VBuf { uint VC[]; };
layout(std430, binding = 3) readonly buffer TBuf { int BT[]; };
layout(std430, binding = 4) readonly buffer SBuf { int SQ[]; };
layout(std430, binding = 5) writeonly buffer DBuf { float D[]; };
layout(std430, binding = 6) readonly buffer SinkBuf { float SINK[]; };  // ABI 1.5, when has_sinks
layout(push_constant) uniform Push {
  uint q_off, q_nb1, q_nb2;
  uint k_off, k_nb1, k_nb2;
  uint v_off, v_nb1, v_nb2;
  uint bt_off, bt_nb1;
  uint sq_off, sq_nb1;
  uint d_off, d_nb1, d_nb2;
  uint head_dim, n_heads, n_kv_heads, n_tok, n_seqs, n_slots, max_blocks, block_size, sliding_window, kv_dtype;
  float scale, softcap;
  uint has_sinks, sink_off;
  uint max_keys;  // 0: any number; else a query row seeing more keys is refused (see record_attention)
  uint flags;
} pc;

const uint DT_F32 = 0u, DT_F16 = 1u, DT_Q4_0 = 2u, DT_Q8_0 = 8u, DT_INT8_KV = 1001u, DT_F8_E4M3 = 1004u;

shared float q_s[MAX_D];
shared float p_s[64];
shared uint vrow_s[64];
shared float vscale_s[64];


// 16 bits at a 2-aligned byte address, and 32 bits at one (two loads when a % 4 == 2).
uint kc_u16(uint a) { return (KC[a >> 2] >> ((a & 2u) << 3)) & 0xffffu; }
uint vc_u16(uint a) { return (VC[a >> 2] >> ((a & 2u) << 3)) & 0xffffu; }
uint kc_word(uint a) { return (a & 2u) == 0u ? KC[a >> 2] : (KC[a >> 2] >> 16) | (KC[(a >> 2) + 1u] << 16); }

// q . k over a Q8_0 / Q4_0 key row at byte address `row`: per block, d times the dot with its quants.
float k_dot_blocks(uint row) {
  bool q8 = pc.kv_dtype == DT_Q8_0;
  uint block_bytes = q8 ? 34u : 18u;
  float dot = 0.0;
  for (uint b = 0u; b < pc.head_dim / 32u; b++) {
    uint a = row + b * block_bytes;
    uint x = 32u * b;  // q_s index of the block's first value
    float s = 0.0;
    if (q8) {
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint w = kc_word(a + 2u + 4u * k);
        [[unroll]] for (uint j = 0u; j < 4u; j++) s += q_s[x + 4u * k + j] * float(int(w << (24u - 8u * j)) >> 24);
      }
    } else {
      [[unroll]] for (uint k = 0u; k < 4u; k++) {
        uint w = kc_word(a + 2u + 4u * k);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
          uint byte = (w >> (8u * j)) & 0xffu;
          s += q_s[x + 4u * k + j] * float(int(byte & 0xfu) - 8) + q_s[x + 4u * k + j + 16u] * float(int(byte >> 4) - 8);
        }
      }
    }
    dot += half_to_float(kc_u16(a)) * s;
  }
  return dot;
}

// Value i of a Q8_0 / Q4_0 value row, scale included.
float v_block_elem(uint row, uint i) {
  uint j = i & 31u;
  if (pc.kv_dtype == DT_Q8_0) {
    uint a = row + (i >> 5) * 34u;
    uint q = a + 2u + j;
    return half_to_float(vc_u16(a)) * float(int(VC[q >> 2] << (24u - ((q & 3u) << 3))) >> 24);
  }
  uint a = row + (i >> 5) * 18u;
  uint q = a + 2u + (j & 15u);
  uint nibble = (VC[q >> 2] >> (((q & 3u) << 3) + (j >> 4) * 4u)) & 0xfu;
  return half_to_float(vc_u16(a)) * float(int(nibble) - 8);
}

float k_elem(uint row, uint i) {  // row: byte address of a 4-aligned cache row (F32, F16, INT8_KV, F8_E4M3)
  if (pc.kv_dtype == DT_F32) return uintBitsToFloat(KC[(row >> 2) + i]);
  if (pc.kv_dtype == DT_F16) return half_to_float((KC[(row >> 2) + (i >> 1)] >> ((i & 1u) << 4)) & 0xffffu);
  if (pc.kv_dtype == DT_F8_E4M3) return e4m3_to_float((KC[(row >> 2) + (i >> 2)] >> ((i & 3u) << 3)) & 0xffu);
  uint a = row + 4u + i;
  return float(int(KC[a >> 2] << (24u - ((a & 3u) << 3))) >> 24);  // times the row scale, by the caller
}
float v_elem(uint row, uint i) {
  if (pc.kv_dtype == DT_F32) return uintBitsToFloat(VC[(row >> 2) + i]);
  if (pc.kv_dtype == DT_F16) return half_to_float((VC[(row >> 2) + (i >> 1)] >> ((i & 1u) << 4)) & 0xffffu);
  if (pc.kv_dtype == DT_F8_E4M3) return e4m3_to_float((VC[(row >> 2) + (i >> 2)] >> ((i & 3u) << 3)) & 0xffu);
  uint a = row + 4u + i;
  return float(int(VC[a >> 2] << (24u - ((a & 3u) << 3))) >> 24);
}

// ALiBi's slope for head h from the max bias, as ggml's soft_max_ext.
float alibi_slope(uint h) {
  float max_bias = uintBitsToFloat(pc.bt_off);
  uint n_log2 = 1u << uint(findMSB(pc.n_heads));
  float m0 = exp2(-max_bias / float(n_log2)), m1 = exp2(-max_bias / 2.0 / float(n_log2));
  return h < n_log2 ? pow(m0, float(h + 1u)) : pow(m1, float(2u * (h - n_log2) + 1u));
}

void main() {
  uint lid = gl_LocalInvocationIndex;
  bool int8 = pc.kv_dtype == DT_INT8_KV;
  bool blocks = pc.kv_dtype == DT_Q8_0 || pc.kv_dtype == DT_Q4_0;
  uint group = pc.n_heads / pc.n_kv_heads;
  bool dense = (pc.flags & 2u) != 0u;
  for (uint t = gl_WorkGroupID.x; t < pc.n_tok; t += gl_NumWorkGroups.x) {
    // The sequence owning query row t (rows outside every sequence are left untouched).
    int first_row = 0, n_query = 0, ctx_len = 0;
    bool non_causal = false;
    uint seq = 0xffffffffu;
    for (uint s = 0u; s < pc.n_seqs; s++) {
      uint base = (pc.sq_off + s * pc.sq_nb1) >> 2;
      int fr = SQ[base], nq = SQ[base + 1u], cl = dense ? nq : SQ[base + 2u];
      if (nq > 0 && fr >= 0 && int(t) >= fr && int(t) < fr + nq) {
        seq = s, first_row = fr, n_query = nq, ctx_len = cl;
        non_causal = dense ? (pc.flags & 4u) == 0u : ((pc.flags & 1u) != 0u && (SQ[base + 3u] & 1) != 0);
        break;
      }
    }
    if (seq == 0xffffffffu) continue;
    if (uint(first_row + n_query) > pc.n_tok) {
      if (lid == 0u) report_error(ERR_SEQ_ROWS, seq);
      continue;
    }
    if (n_query > ctx_len) {
      if (lid == 0u) report_error(ERR_SEQ_CTX, seq);
      continue;
    }
    if (!dense && uint(ctx_len) > pc.max_blocks * pc.block_size) {
      if (lid == 0u) report_error(ERR_SEQ_TABLE, seq);
      continue;
    }
    uint pos = uint(ctx_len - n_query) + (t - uint(first_row));
    uint first = (pc.sliding_window == 0u || pos < pc.sliding_window) ? 0u : pos - pc.sliding_window + 1u;
    uint last = non_causal ? uint(ctx_len) - 1u : pos;
    if ((pc.flags & 8u) != 0u) {
      uint half_window = pc.sliding_window / 2u;
      first = pos > half_window ? pos - half_window : 0u;
      last = min(uint(ctx_len) - 1u, pos + half_window);
    }
    uint table = (pc.bt_off + seq * pc.bt_nb1) >> 2;
    if (pc.max_keys != 0u && last - first + 1u > pc.max_keys) {
      if (lid == 0u) report_error(ERR_KEYS, last - first + 1u);
      continue;
    }

    for (uint h = gl_WorkGroupID.y; h < pc.n_heads; h += gl_NumWorkGroups.y) {
      uint kvh = h / group;
      float slope = (pc.flags & 16u) != 0u ? alibi_slope(h) : 0.0;
      uint q = (pc.q_off + h * pc.q_nb1 + t * pc.q_nb2) >> 2;
      for (uint i = lid; i < pc.head_dim; i += 64u) q_s[i] = Q[q + i];
      barrier();
      float m = uintBitsToFloat(0xff800000u);  // -inf
      float l = 0.0;
      float acc[MAX_D / 64u];
      [[unroll]] for (uint k = 0u; k < MAX_D / 64u; k++) acc[k] = 0.0;
      for (uint j0 = first; j0 <= last; j0 += 64u) {
        uint j = j0 + lid;
        float score = uintBitsToFloat(0xff800000u);
        if (j <= last) {
          int block = dense ? 0 : BT[table + j / pc.block_size];
          uint slot = dense ? uint(first_row) + j : uint(block) * pc.block_size + j % pc.block_size;
          if (block < 0 || slot >= pc.n_slots) {
            report_error(ERR_BLOCK, uint(block));
            vrow_s[lid] = 0xffffffffu;
          } else {
            uint krow = pc.k_off + kvh * pc.k_nb1 + slot * pc.k_nb2;
            float dot = 0.0;
            if (blocks) {
              dot = k_dot_blocks(krow);
            } else {
              for (uint i = 0u; i < pc.head_dim; i++) dot += q_s[i] * k_elem(krow, i);
              if (int8) dot *= uintBitsToFloat(KC[krow >> 2]);
            }
            score = dot * pc.scale;
            if (pc.softcap > 0.0) score = pc.softcap * safe_tanh(score / pc.softcap);
            score -= slope * abs(float(int(pos) - int(j)));
            uint vrow = pc.v_off + kvh * pc.v_nb1 + slot * pc.v_nb2;
            vrow_s[lid] = vrow;
            vscale_s[lid] = int8 ? uintBitsToFloat(VC[vrow >> 2]) : 1.0;
          }
        }
        float m_new = max(m, wg_max(score));
        float p = score == uintBitsToFloat(0xff800000u) ? 0.0 : exp(score - m_new);
        p_s[lid] = p;
        float alpha = m == uintBitsToFloat(0xff800000u) ? 0.0 : exp(m - m_new);
        l = l * alpha + wg_sum(p);  // wg_sum's barrier also publishes p_s / vrow_s
        m = m_new;
        uint n = min(64u, last + 1u - j0);
        [[unroll]] for (uint k = 0u; k < MAX_D / 64u; k++) {
          uint d = lid + 64u * k;
          if (d < pc.head_dim) {
            float a = acc[k] * alpha;
            for (uint jj = 0u; jj < n; jj++) {
              if (vrow_s[jj] == 0xffffffffu) continue;
              a += p_s[jj] * vscale_s[jj] * (blocks ? v_block_elem(vrow_s[jj], d) : v_elem(vrow_s[jj], d));
            }
            acc[k] = a;
          }
        }
        barrier();  // p_s / vrow_s are rewritten by the next tile
      }
      if (pc.has_sinks != 0u) {
        // The sink is one more score with no value: it joins the max and the denominator only.
        float sink = SINK[(pc.sink_off >> 2) + h];
        float m_final = max(m, sink);
        float alpha = m == uintBitsToFloat(0xff800000u) ? 0.0 : exp(m - m_final);
        l = l * alpha + exp(sink - m_final);
        [[unroll]] for (uint k = 0u; k < MAX_D / 64u; k++) acc[k] *= alpha;
      }
      uint o = (pc.d_off + h * pc.d_nb1 + t * pc.d_nb2) >> 2;
      float inv_l = l > 0.0 ? 1.0 / l : 0.0;
      [[unroll]] for (uint k = 0u; k < MAX_D / 64u; k++) {
        uint d = lid + 64u * k;
        if (d < pc.head_dim) D[o + d] = acc[k] * inv_l;
      }
      barrier();  // q_s is rewritten for the next head
    }
  }
}
