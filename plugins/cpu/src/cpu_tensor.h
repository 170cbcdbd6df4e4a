// The CPU backend's internal vocabulary: element conversions, quantized block decoding, and the
// validated tensor views that the reference and fast op layers both consume.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "loom/backend.h"

namespace loom::cpu {

// An error raised inside the plugin; the ABI edge turns it into `status` + last_error message.
struct OpError : std::runtime_error {
  loom_status status;
  OpError(loom_status s, const std::string& message) : std::runtime_error(message), status(s) {}
};
[[noreturn]] inline void invalid(const std::string& message) { throw OpError(LOOM_STATUS_INVALID_ARGUMENT, message); }
[[noreturn]] inline void unsupported(const std::string& message) { throw OpError(LOOM_STATUS_UNSUPPORTED, message); }

// ---- scalar conversions (bit-exact with F16C / GGML) -------------------------------------------
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even, inf/NaN preserved
inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 64);  // keep NaN a quiet NaN
  return uint16_t((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// ---- dtype layout --------------------------------------------------------------------------------
struct TypeLayout {
  int64_t block_elems = 0;  // 0 = unknown to this backend
  uint64_t block_bytes = 0;
};
// Layout of plain and block types. LOOM_DTYPE_INT8_KV is special: a row is 4 + ne0 bytes.
TypeLayout type_layout(loom_dtype type);
const char* dtype_name(loom_dtype type);
uint64_t row_bytes(loom_dtype type, int64_t ne0);
bool is_weight_dtype(loom_dtype type);  // MATMUL / GET_ROWS src0 types this backend implements
bool is_kv_dtype(loom_dtype type);      // F32, F16, INT8_KV, Q8_0, Q4_0, F8_E4M3

// Decode one row of `n` elements of `type` into floats (the reference decoding: plain loops).
void dequantize_row(loom_dtype type, const void* row, float* out, int64_t n);
// Encode n floats as an INT8_KV row: f32 scale (max|x|/127) then n int8.
void quantize_row_int8_kv(const float* x, void* row, int64_t n);
// One KV cache row of a quantized KV type (INT8_KV, or Q8_0 / Q4_0 blocks as ggml's reference
// quantizer writes them) from n floats.
void quantize_kv_row(loom_dtype type, const float* x, void* row, int64_t n);
// Q4_K's 12-byte packing of eight 6-bit scales and eight 6-bit mins (ggml's get_scale_min_k4).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// ---- validated views -------------------------------------------------------------------------------
// A tensor whose bounds have been checked against its buffer. data == nullptr: absent operand.
struct Tensor {
  loom_dtype dtype = LOOM_DTYPE_F32;
  uint8_t* data = nullptr;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nb[4] = {0, 0, 0, 0};

  bool present() const { return data != nullptr; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  // Row r of the flattened [ne1, ne2, ne3] index space.
  uint8_t* row(int64_t r) const {
    const int64_t i1 = r % ne[1], i2 = (r / ne[1]) % ne[2], i3 = r / (ne[1] * ne[2]);
    return data + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
  }
  uint8_t* at(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const { return data + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]; }
  float* frow(int64_t r) const { return reinterpret_cast<float*>(row(r)); }
};

// Op parameters with defaults filled in (params NULL or shorter than the field → default).
struct OpParams {
  float scale = 1.0f;
  float eps = 1e-6f;
  loom_rope_mode rope_mode = LOOM_ROPE_NORMAL;
  uint32_t n_dims = 0;  // 0 → head_dim
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool rope_freq_factors = false;  // LOOM_ROPE_FREQ_FACTORS: src2 holds one divisor per rotated pair
  float yarn_ext_factor = 0.0f;    // LOOM_ROPE_YARN: 0 = plain (interpolated) frequencies
  float yarn_corr_low = 0.0f, yarn_corr_high = 0.0f;
  loom_activation activation = LOOM_ACTIVATION_SILU;
  float attn_scale = 0.0f;  // 0 → 1/sqrt(head_dim)
  uint32_t block_size = 0;
  uint32_t sliding_window = 0;
  float softcap = 0.0f;
  uint32_t moe_n_used = 0;  // MOE_ROUTE (scale is its weight scale)
  loom_moe_gating moe_gating = LOOM_MOE_GATING_SOFTMAX;
  bool moe_normalize = false;
  float delta_q_scale = 1.0f;  // GATED_DELTA_NET
  bool delta_normalize_qk = false;
  float delta_l2_eps = 0.0f;
  bool delta_grouped_heads = false;  // (ABI 1.7) v head h reads key head h / (n_v / n_k), not h % n_k
  bool causal = false;  // (ABI 1.9) ATTENTION
  uint32_t attn_window = 0;     // (ABI 1.14) ATTENTION: rows j with |i - j| <= attn_window / 2; 0 = all
  float alibi_max_bias = 0.0f;  // (ABI 1.14) ATTENTION: ALiBi's max bias; 0 = none
  bool seq_flags = false;  // (ABI 1.9) PAGED_ATTENTION: column 3 of seqs holds LOOM_SEQ_* flags
  uint32_t window = 0;  // (ABI 1.9) PATCHES' patch size, POOL_2D's kernel
  float clamp_min = 0.0f, clamp_max = 0.0f;  // (ABI 1.11) CLAMP
  bool mrope = false;  // (ABI 1.12) ROPE: LOOM_ROPE_MROPE, positions [n_tok, 4]
  int32_t sections[4] = {0, 0, 0, 0};
  bool mrope_interleaved = false;  // (ABI 1.13) LOOM_ROPE_MROPE_INTERLEAVED: sections cycle pair by pair
};

struct OpArgs {
  loom_op_type type = 0;
  Tensor dst;
  uint32_t n_src = 0;
  Tensor src[LOOM_OP_MAX_SRC];
  OpParams params;
};

// Activations shared by both layers so they agree on the formula.
float activation_value(loom_activation act, float x);
// One element of a gated unit: act(g) * u, or gpt-oss's clamped form for SWIGLU_OAI.
float glu_value(loom_activation act, float g, float u);

}  // namespace loom::cpu
