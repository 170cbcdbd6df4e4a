// The Vulkan backend's op validation: the rules shared by every backend (plugins/common) plus what
// the shaders need (32-bit byte addressing, word-aligned operands, KV rows read as whole words), and
// the dtypes this backend declares.
#include "backend_op_validation.h"
#include "vk_error.h"
#include "vk_tensor.h"

namespace loom::vk {
namespace {

// Shaders read whole words: 4-byte alignment for 32-bit data, 2 for 16-bit data and blocks.
uint64_t word_alignment(loom_dtype dtype) {
  if (dtype == LOOM_DTYPE_MXFP4) return 1;  // 17-byte blocks: the shaders read them byte by byte
  return (dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_I32 || dtype == LOOM_DTYPE_INT8_KV || dtype == LOOM_DTYPE_F8_E4M3 ||
          dtype == LOOM_DTYPE_F8_E4M3_B32)
             ? 4
             : 2;
}

struct VkOpRules : plugin_support::BaseOpRules {
  using Buffer = loom_buffer;
  using Tensor = vk::Tensor;
  using OpArgs = vk::OpArgs;
  static constexpr const char* kBackendName = "vulkan";
  static constexpr uint32_t kBufferMagic = vk::kBufferMagic;
  static constexpr int64_t kMaxDim = int64_t(1) << 31;
  // Shaders address operands in bytes with 32-bit arithmetic: supports_op already refuses views
  // whose extent overflows.
  static constexpr bool kExtentInShapeChecks = true;
  // rope.comp divides by the factors and takes YaRN's blend from the host's frequency table.
  static constexpr bool kRopeFreqFactors = true;
  static constexpr bool kRopeYarn = true;
  // activation.glsl has both; ssm_conv.comp and gated_delta_net.comp are the recurrent ops (with
  // their own size limits, checked when recording).
  static constexpr bool kSigmoid = true;
  static constexpr bool kSoftplus = true;
  static constexpr bool kRecurrent = true;
  // moe_route.comp, moe_matvec.comp (every weight type) and moe_sum.comp.
  static constexpr bool kMoe = true;
  // gpt-oss: paged_attention.comp's sinks and glu.comp's clamped SwiGLU.
  static constexpr bool kAttentionSinks = true;
  static constexpr bool kSwigluOai = true;
  // The encoder ops (ABI 1.9): layer_norm.comp, patches.comp, pool_2d.comp, and ATTENTION and the
  // non-causal sequence flag in paged_attention.comp.
  static constexpr bool kEncoder = true;
  static constexpr bool kEncoderWindowAlibi = true;
  static constexpr bool kGeluQuick = true;
  static constexpr bool kClamp = true;
  static constexpr bool kLora = true;  // lora.comp, ranks up to 256 (checked when recording)
  static constexpr bool kRopeMrope = true;
  static constexpr bool kRopeMropeInterleaved = true;
  static constexpr bool kSeqFlags = true;

  [[noreturn]] static void invalid(const std::string& message) { vk::invalid(message); }
  [[noreturn]] static void unsupported(const std::string& message) { vk::unsupported(message); }
  static TypeLayout type_layout(loom_dtype type) { return vk::type_layout(type); }
  static const char* dtype_name(loom_dtype type) { return vk::dtype_name(type); }
  static uint64_t row_bytes(loom_dtype type, int64_t ne0) { return vk::row_bytes(type, ne0); }
  static bool is_weight_dtype(loom_dtype type) { return vk::is_weight_dtype(type); }
  static bool is_kv_dtype(loom_dtype type) { return vk::is_kv_dtype(type); }

  // Strides must fit in 32 bits and keep the element alignment.
  template <typename Checker>
  static void check_view(const Checker& c, const loom_tensor& t, Tensor& out, const char* role) {
    out.offset = t.offset;
    const std::string r = role;
    const uint64_t align = word_alignment(t.dtype);
    for (int i = 1; i < 4; i++) {
      if (t.ne[i] == 1) continue;
      if (t.nb[i] % align != 0) c.unsupported(r + " nb[" + std::to_string(i) + "]=" + std::to_string(t.nb[i]) + " is not a multiple of " + std::to_string(align) + " bytes");
      if (t.nb[i] > 0xffffffffull) c.unsupported(r + " nb[" + std::to_string(i) + "] does not fit in 32 bits");
    }
  }

  template <typename Checker>
  static void bind(const Checker& c, const loom_tensor& t, const Buffer& buffer, uint64_t extent, const char* role, Tensor& out) {
    const uint64_t align = word_alignment(t.dtype);
    if (t.offset % align != 0) c.unsupported(std::string(role) + " offset " + std::to_string(t.offset) + " is not a multiple of " + std::to_string(align) + " bytes");
    out.extent = extent;
    out.buffer = &buffer;
    out.present = true;
  }

  // Cache rows are read and written as whole words (F16 in pairs, INT8_KV in fours after the scale,
  // F8_E4M3 in fours).
  // Q8_0 / Q4_0 rows are whole blocks (34 / 18 bytes) at any 2-byte boundary, which check_view and
  // bind already require: store_kv.comp writes a word shared with a neighbouring row atomically.
  template <typename Checker>
  static void check_kv_cache(const Checker& c, const Tensor& cache, const char* role) {
    const std::string r = role;
    if (cache.ne[0] > kMaxHeadDim) c.unsupported(r + " head_dim " + std::to_string(cache.ne[0]) + " exceeds " + std::to_string(kMaxHeadDim));
    if (cache.dtype == LOOM_DTYPE_Q8_0 || cache.dtype == LOOM_DTYPE_Q4_0) {
      // (The shared shape checks already call such a view invalid; the shaders' rule is stated here.)
      if (cache.ne[0] % 32 != 0)
        c.unsupported(r + " " + dtype_name(cache.dtype) + " cache needs head_dim % 32 == 0 (rows of whole 32-value blocks)");
      return;
    }
    for (int i = 1; i < 3; i++)
      if (cache.ne[i] > 1 && cache.nb[i] % 4 != 0) c.unsupported(r + " strides must be multiples of 4 bytes");
    if (cache.offset % 4 != 0) c.unsupported(r + " offset must be a multiple of 4 bytes");
    if (cache.dtype == LOOM_DTYPE_F16 && cache.ne[0] % 2 != 0) c.unsupported(r + " F16 cache needs an even head_dim");
    if (cache.dtype == LOOM_DTYPE_INT8_KV && cache.ne[0] % 4 != 0) c.unsupported(r + " INT8_KV cache needs head_dim % 4 == 0");
    if (cache.dtype == LOOM_DTYPE_F8_E4M3 && cache.ne[0] % 4 != 0) c.unsupported(r + " F8_E4M3 cache needs head_dim % 4 == 0");
  }

  template <typename Checker>
  static void check_kv_pair(const Checker& c, const Tensor& k_cache, const Tensor& v_cache) {
    if (k_cache.dtype != v_cache.dtype) c.unsupported("k_cache and v_cache must have the same dtype");
  }
};

}  // namespace

OpArgs resolve_op(const loom_op& op, bool need_buffers) { return plugin_support::resolve_op<VkOpRules>(op, need_buffers); }

}  // namespace loom::vk

namespace loom::vk {

TypeLayout type_layout(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32: return {1, 4};
    case LOOM_DTYPE_I32: return {1, 4};
    case LOOM_DTYPE_F16: return {1, 2};
    case LOOM_DTYPE_BF16: return {1, 2};
    case LOOM_DTYPE_Q4_0: return {LOOM_QK4_0, sizeof(loom_block_q4_0)};
    case LOOM_DTYPE_Q8_0: return {LOOM_QK8_0, sizeof(loom_block_q8_0)};
    case LOOM_DTYPE_Q4_K: return {LOOM_QK_K, sizeof(loom_block_q4_k)};
    case LOOM_DTYPE_Q6_K: return {LOOM_QK_K, sizeof(loom_block_q6_k)};
    // GGML's layouts (ggml-common.h), decoded by shaders/dequant_more.glsl.
    case LOOM_DTYPE_Q4_1: return {32, 20};
    case LOOM_DTYPE_Q5_0: return {32, 22};
    case LOOM_DTYPE_Q5_1: return {32, 24};
    case LOOM_DTYPE_IQ4_NL: return {32, 18};
    case LOOM_DTYPE_Q2_K: return {LOOM_QK_K, 84};
    case LOOM_DTYPE_Q3_K: return {LOOM_QK_K, 110};
    case LOOM_DTYPE_Q5_K: return {LOOM_QK_K, 176};
    case LOOM_DTYPE_IQ4_XS: return {LOOM_QK_K, 136};
    case LOOM_DTYPE_MXFP4: return {LOOM_QK_MXFP4, sizeof(loom_block_mxfp4)};
    case LOOM_DTYPE_F8_E4M3_B32: return {LOOM_QK_F8_E4M3_B32, sizeof(loom_block_f8_e4m3_b32)};
    case LOOM_DTYPE_INT8_KV: return {1, 1};
    case LOOM_DTYPE_F8_E4M3: return {1, 1};
    default: return {};
  }
}

const char* dtype_name(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32: return "F32";
    case LOOM_DTYPE_F16: return "F16";
    case LOOM_DTYPE_BF16: return "BF16";
    case LOOM_DTYPE_I32: return "I32";
    case LOOM_DTYPE_Q4_0: return "Q4_0";
    case LOOM_DTYPE_Q4_1: return "Q4_1";
    case LOOM_DTYPE_Q5_0: return "Q5_0";
    case LOOM_DTYPE_Q5_1: return "Q5_1";
    case LOOM_DTYPE_Q8_0: return "Q8_0";
    case LOOM_DTYPE_Q2_K: return "Q2_K";
    case LOOM_DTYPE_Q3_K: return "Q3_K";
    case LOOM_DTYPE_Q4_K: return "Q4_K";
    case LOOM_DTYPE_Q5_K: return "Q5_K";
    case LOOM_DTYPE_Q6_K: return "Q6_K";
    case LOOM_DTYPE_Q8_K: return "Q8_K";
    case LOOM_DTYPE_IQ4_NL: return "IQ4_NL";
    case LOOM_DTYPE_IQ4_XS: return "IQ4_XS";
    case LOOM_DTYPE_MXFP4: return "MXFP4";
    case LOOM_DTYPE_F8_E4M3_B32: return "F8_E4M3_B32";
    case LOOM_DTYPE_INT8_KV: return "INT8_KV";
    case LOOM_DTYPE_I8_ROW: return "I8_ROW";
    case LOOM_DTYPE_I4_G128: return "I4_G128";
    case LOOM_DTYPE_F8_E4M3: return "F8_E4M3";
    default: return "unknown";
  }
}

uint64_t row_bytes(loom_dtype type, int64_t ne0) {
  if (type == LOOM_DTYPE_INT8_KV) return 4 + uint64_t(ne0);
  const TypeLayout l = type_layout(type);
  return uint64_t(ne0 / l.block_elems) * l.block_bytes;
}

bool is_weight_dtype(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_F16:
    case LOOM_DTYPE_BF16:
    case LOOM_DTYPE_Q4_0:
    case LOOM_DTYPE_Q4_1:
    case LOOM_DTYPE_Q5_0:
    case LOOM_DTYPE_Q5_1:
    case LOOM_DTYPE_Q8_0:
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q5_K:
    case LOOM_DTYPE_Q6_K:
    case LOOM_DTYPE_IQ4_NL:
    case LOOM_DTYPE_IQ4_XS:
    case LOOM_DTYPE_MXFP4:
    case LOOM_DTYPE_F8_E4M3_B32: return true;
    default: return false;
  }
}

bool is_kv_dtype(loom_dtype type) {
  return type == LOOM_DTYPE_F32 || type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_INT8_KV || type == LOOM_DTYPE_Q8_0 ||
         type == LOOM_DTYPE_Q4_0 || type == LOOM_DTYPE_F8_E4M3;
}

}  // namespace loom::vk
