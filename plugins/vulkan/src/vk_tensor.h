// The plugin's buffer handle, dtype layouts and validated op arguments.
#pragma once

#include <cstdint>
#include <string>

#include "loom/backend.h"
#include "vk_context.h"

// The opaque buffer handle: one VkBuffer with its own memory.
struct loom_buffer {
  uint32_t magic;  // kBufferMagic while alive: catches some stale or foreign handles
  loom::vk::MemoryBlock block;
  uint64_t size;  // bytes the caller asked for
};

namespace loom::vk {

inline constexpr uint32_t kBufferMagic = 0x4c564b42u;
inline constexpr int64_t kMaxHeadDim = 512;  // paged_attention.comp's MAX_D

struct TypeLayout {
  int64_t block_elems = 0;  // 0 = unknown to this backend
  uint64_t block_bytes = 0;
};
TypeLayout type_layout(loom_dtype type);
const char* dtype_name(loom_dtype type);
uint64_t row_bytes(loom_dtype type, int64_t ne0);
bool is_weight_dtype(loom_dtype type);  // MATMUL / GET_ROWS src0 types with a shader
bool is_kv_dtype(loom_dtype type);      // F32, F16, INT8_KV, Q8_0, Q4_0 (ggml blocks; head_dim % 32 == 0), F8_E4M3

// A validated view. buffer == nullptr: absent operand (or shapes-only validation).
struct Tensor {
  loom_dtype dtype = LOOM_DTYPE_F32;
  const loom_buffer* buffer = nullptr;
  uint64_t offset = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nb[4] = {0, 0, 0, 0};
  uint64_t extent = 0;  // bytes from offset to the end of the last element
  bool present = false;

  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

struct OpParams {
  float scale = 1.0f;
  float eps = 1e-6f;
  loom_rope_mode rope_mode = LOOM_ROPE_NORMAL;
  uint32_t n_dims = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool rope_freq_factors = false;  // src2 divides each pair's frequency (ABI 1.1)
  float yarn_ext_factor = 0.0f, yarn_corr_low = 0.0f, yarn_corr_high = 0.0f;  // YaRN (ABI 1.2)
  loom_activation activation = LOOM_ACTIVATION_SILU;
  float attn_scale = 0.0f;
  uint32_t block_size = 0;
  uint32_t sliding_window = 0;
  float softcap = 0.0f;
  uint32_t moe_n_used = 0;  // MOE_ROUTE (ABI 1.5; scale is its weight scale)
  loom_moe_gating moe_gating = LOOM_MOE_GATING_SOFTMAX;
  bool moe_normalize = false;
  float delta_q_scale = 1.0f;  // GATED_DELTA_NET (ABI 1.6)
  bool delta_normalize_qk = false;
  float delta_l2_eps = 0.0f;
  bool delta_grouped_heads = false;  // (ABI 1.7) v head h reads key head h / (n_v / n_k), not h % n_k
  bool causal = false;     // (ABI 1.9) ATTENTION
  uint32_t attn_window = 0;     // (ABI 1.14) ATTENTION: rows j with |i - j| <= attn_window / 2; 0 = all
  float alibi_max_bias = 0.0f;  // (ABI 1.14) ATTENTION: ALiBi's max bias; 0 = none
  bool seq_flags = false;  // (ABI 1.9) PAGED_ATTENTION: column 3 of seqs holds LOOM_SEQ_* flags
  uint32_t window = 0;     // (ABI 1.9) PATCHES' patch size, POOL_2D's kernel
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

// Throws OpError: UNSUPPORTED for what this backend does not implement (dtypes, alignments, sizes),
// INVALID_ARGUMENT for inconsistent shapes, strides, params or out-of-bounds views. With
// need_buffers == false only types and shapes are checked (supports_op).
OpArgs resolve_op(const loom_op& op, bool need_buffers);

// Records the op's dispatches on the stream (vk_ops.cpp).
class Stream;
void record_op(Context& ctx, Stream& stream, const OpArgs& args);

}  // namespace loom::vk
