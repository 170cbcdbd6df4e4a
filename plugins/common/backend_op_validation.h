// Op validation shared by the backend plugins' supports_op and run_ops: after resolve_op returns, an
// op implementation may index every element of every operand without further bounds checks
// (data-dependent indices such as row ids, slots and block tables are checked by the ops themselves).
//
// Every backend accepts and refuses ops by the same rules, so the rules live here once, as a
// template over what differs between plugins. A backend passes a Rules struct (derive from
// BaseOpRules and override what differs):
//   Buffer, Tensor, OpArgs         its loom_buffer definition (with magic and size) and validated views
//   kBackendName, kBufferMagic     named in messages / checked on each buffer handle
//   kMaxDim                        largest ne[i] accepted
//   kExtentInShapeChecks           also reject overflowing strides when only shapes are checked
//   invalid, unsupported           throw its own OpError with INVALID_ARGUMENT / UNSUPPORTED
//   type_layout, dtype_name, row_bytes, is_weight_dtype, is_kv_dtype   the dtypes it declares
//   bind                           fill a checked view from its buffer (data pointer, handle, ...)
//   check_view, check_kv_cache, check_kv_pair, check_attention         its extra restrictions
// Header-only; like the rest of plugins/common it uses only the standard library and the C ABI.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "loom/backend.h"

namespace loom::plugin_support {

inline const char* op_type_name(loom_op_type type) {
  switch (type) {
    case LOOM_OP_GET_ROWS: return "GET_ROWS";
    case LOOM_OP_MATMUL: return "MATMUL";
    case LOOM_OP_ADD: return "ADD";
    case LOOM_OP_MUL: return "MUL";
    case LOOM_OP_SCALE: return "SCALE";
    case LOOM_OP_RMS_NORM: return "RMS_NORM";
    case LOOM_OP_ROPE: return "ROPE";
    case LOOM_OP_GLU: return "GLU";
    case LOOM_OP_UNARY: return "UNARY";
    case LOOM_OP_COPY: return "COPY";
    case LOOM_OP_STORE_KV: return "STORE_KV";
    case LOOM_OP_PAGED_ATTENTION: return "PAGED_ATTENTION";
    case LOOM_OP_SOFTMAX: return "SOFTMAX";
    case LOOM_OP_MOE_ROUTE: return "MOE_ROUTE";
    case LOOM_OP_MOE_MATMUL: return "MOE_MATMUL";
    case LOOM_OP_MOE_SUM: return "MOE_SUM";
    case LOOM_OP_SSM_CONV: return "SSM_CONV";
    case LOOM_OP_GATED_DELTA_NET: return "GATED_DELTA_NET";
    case LOOM_OP_LAYER_NORM: return "LAYER_NORM";
    case LOOM_OP_ATTENTION: return "ATTENTION";
    case LOOM_OP_PATCHES: return "PATCHES";
    case LOOM_OP_POOL_2D: return "POOL_2D";
    case LOOM_OP_CLAMP: return "CLAMP";
    case LOOM_OP_LORA: return "LORA";
    default: return nullptr;
  }
}

inline std::string shape_str(const int64_t* ne) {
  std::ostringstream s;
  s << "[" << ne[0] << ", " << ne[1] << ", " << ne[2] << ", " << ne[3] << "]";
  return s.str();
}

// Defaults for what most backends do not restrict further; a backend's Rules hides any of them.
// The hooks are templates so that they accept any backend's checker and tensor types.
struct BaseOpRules {
  static constexpr int64_t kMaxDim = int64_t(1) << 40;
  static constexpr bool kExtentInShapeChecks = false;
  // ROPE with LOOM_ROPE_FREQ_FACTORS (ABI 1.1); a backend that implements it also has
  // OpParams::rope_freq_factors.
  static constexpr bool kRopeFreqFactors = false;
  // ROPE with LOOM_ROPE_YARN (ABI 1.2); a backend that implements it also has OpParams::yarn_*.
  static constexpr bool kRopeYarn = false;
  // ROPE with LOOM_ROPE_MROPE (ABI 1.12); a backend that implements it also has OpParams::mrope and
  // OpParams::sections.
  static constexpr bool kRopeMrope = false;
  // ROPE with LOOM_ROPE_MROPE_INTERLEAVED (ABI 1.13); a backend that implements it also has
  // OpParams::mrope_interleaved.
  static constexpr bool kRopeMropeInterleaved = false;
  // The mixture-of-experts ops (ABI 1.5); a backend that implements them also has OpParams::moe_*.
  static constexpr bool kMoe = false;
  // PAGED_ATTENTION's sinks (src5) and GLU's LOOM_ACTIVATION_SWIGLU_OAI (ABI 1.5, gpt-oss).
  static constexpr bool kAttentionSinks = false;
  static constexpr bool kSwigluOai = false;
  static constexpr bool kSigmoid = false;  // LOOM_ACTIVATION_SIGMOID (ABI 1.5)
  // SSM_CONV and GATED_DELTA_NET (ABI 1.6); a backend that implements them also has
  // OpParams::delta_*. LOOM_ACTIVATION_SOFTPLUS (ABI 1.6).
  static constexpr bool kRecurrent = false;
  static constexpr bool kSoftplus = false;
  // LAYER_NORM, ATTENTION, PATCHES and POOL_2D (ABI 1.9); a backend that implements them also has
  // OpParams::causal and OpParams::window.
  static constexpr bool kEncoder = false;
  // ATTENTION's symmetric window and ALiBi (ABI 1.14); a backend that implements them also has
  // OpParams::attn_window and OpParams::alibi_max_bias.
  static constexpr bool kEncoderWindowAlibi = false;
  // PAGED_ATTENTION's per-sequence flags (ABI 1.9, LOOM_SEQ_NON_CAUSAL); a backend that implements them
  // also has OpParams::seq_flags.
  static constexpr bool kSeqFlags = false;
  static constexpr bool kGeluQuick = false;  // LOOM_ACTIVATION_GELU_QUICK (ABI 1.10)
  // CLAMP (ABI 1.11); a backend that implements it also has OpParams::clamp_min and clamp_max.
  static constexpr bool kClamp = false;
  // LORA (ABI 1.16).
  static constexpr bool kLora = false;

  // After the common shape and stride checks of one operand (offset and strides not yet bounded).
  template <typename Checker, typename Tensor>
  static void check_view(const Checker&, const loom_tensor&, Tensor&, const char* /*role*/) {}
  // Each KV cache operand of STORE_KV and PAGED_ATTENTION, after its dtype and shape checks.
  template <typename Checker, typename Tensor>
  static void check_kv_cache(const Checker&, const Tensor&, const char* /*role*/) {}
  // Both caches, after each was checked.
  template <typename Checker, typename Tensor>
  static void check_kv_pair(const Checker&, const Tensor& /*k_cache*/, const Tensor& /*v_cache*/) {}
  // PAGED_ATTENTION after all common checks.
  template <typename Checker, typename OpArgs>
  static void check_attention(const Checker&, const OpArgs&) {}
};

template <typename Rules>
struct OpChecker {
  using Tensor = typename Rules::Tensor;
  using Buffer = typename Rules::Buffer;

  const loom_op& op;
  bool need_buffers;
  std::string prefix;  // "<OP NAME>: "

  [[noreturn]] void invalid(const std::string& what) const { Rules::invalid(prefix + what); }
  [[noreturn]] void unsupported(const std::string& what) const { Rules::unsupported(prefix + what); }

  // Validates one operand's shape, strides and bounds into a Tensor.
  Tensor tensor(const loom_tensor& t, const char* role, bool optional = false) const {
    const std::string r = role;
    Tensor out;
    if (t.struct_size < sizeof(loom_tensor)) invalid(r + ": loom_tensor.struct_size too small");
    out.dtype = t.dtype;
    for (int i = 0; i < 4; i++) {
      out.ne[i] = t.ne[i];
      out.nb[i] = t.nb[i];
    }
    if (need_buffers && t.buffer == nullptr) {
      if (optional) return Tensor{};
      invalid(r + " has no buffer");
    }
    const auto layout = Rules::type_layout(t.dtype);
    if (layout.block_elems == 0)
      unsupported(r + " dtype " + Rules::dtype_name(t.dtype) + " is not supported by the " + Rules::kBackendName + " backend");
    for (int i = 0; i < 4; i++)
      if (t.ne[i] < 1 || t.ne[i] > Rules::kMaxDim) invalid(r + " has invalid shape " + shape_str(t.ne));
    if (t.ne[0] % layout.block_elems != 0)
      invalid(r + " ne[0]=" + std::to_string(t.ne[0]) + " is not a multiple of the " + Rules::dtype_name(t.dtype) +
              " block size " + std::to_string(layout.block_elems));
    const uint64_t rb = Rules::row_bytes(t.dtype, t.ne[0]);
    const bool nb0_ok = t.nb[0] == layout.block_bytes || (t.dtype == LOOM_DTYPE_INT8_KV && t.nb[0] == rb);
    if (!nb0_ok)
      invalid(r + " nb[0]=" + std::to_string(t.nb[0]) + " must be the element/block size " + std::to_string(layout.block_bytes) +
              " (rows must be contiguous)");
    if (t.ne[1] > 1 && t.nb[1] < rb) invalid(r + " nb[1]=" + std::to_string(t.nb[1]) + " is smaller than a row (" + std::to_string(rb) + " bytes)");
    Rules::check_view(*this, t, out, role);
    uint64_t extent = 0;
    if constexpr (Rules::kExtentInShapeChecks) extent = view_extent(t, rb, r);
    if (!need_buffers) return out;
    const auto* buffer = static_cast<const Buffer*>(t.buffer);
    if (buffer->magic != Rules::kBufferMagic) invalid(r + " buffer is not a live " + Rules::kBackendName + " backend buffer");
    if constexpr (!Rules::kExtentInShapeChecks) extent = view_extent(t, rb, r);
    uint64_t end;
    if (__builtin_add_overflow(extent, t.offset, &end) || end > buffer->size)
      invalid(r + " view (offset " + std::to_string(t.offset) + " + extent " + std::to_string(extent) +
              " bytes) exceeds its buffer of " + std::to_string(buffer->size) + " bytes");
    Rules::bind(*this, t, *buffer, extent, role, out);
    return out;
  }

  // Bytes from the view's offset to the end of its last element: row bytes + sum((ne[i]-1) * nb[i]).
  uint64_t view_extent(const loom_tensor& t, uint64_t row_bytes, const std::string& role) const {
    uint64_t extent = row_bytes;
    for (int i = 1; i < 4; i++) {
      uint64_t term;
      if (__builtin_mul_overflow(uint64_t(t.ne[i] - 1), t.nb[i], &term) || __builtin_add_overflow(extent, term, &extent))
        invalid(role + " strides overflow");
    }
    return extent;
  }

  // Whether optional operand `i` is left out: not among the op's sources, a NULL buffer (run), or
  // ne[0] == 0 (supports_op, where only shapes are asked).
  bool absent(uint32_t i) const {
    return op.n_src <= i || (need_buffers ? op.src[i].buffer == nullptr : op.src[i].ne[0] == 0);
  }

  void expect_dtype(const Tensor& t, loom_dtype dtype, const char* role) const {
    if (t.dtype != dtype)
      unsupported(std::string(role) + " must be " + Rules::dtype_name(dtype) + ", got " + Rules::dtype_name(t.dtype));
  }
  void expect_shape(const Tensor& t, const int64_t* ne, const char* role) const {
    for (int i = 0; i < 4; i++)
      if (t.ne[i] != ne[i]) invalid(std::string(role) + " has shape " + shape_str(t.ne) + ", expected " + shape_str(ne));
  }
  void expect_shape(const Tensor& t, int64_t a, int64_t b, int64_t c, int64_t d, const char* role) const {
    const int64_t ne[4] = {a, b, c, d};
    expect_shape(t, ne, role);
  }
  void expect_kv_dtype(const Tensor& t, const char* role) const {
    if (!Rules::is_kv_dtype(t.dtype))
      unsupported(std::string(role) + " dtype " + Rules::dtype_name(t.dtype) + " is not a KV cache type of the " + Rules::kBackendName + " backend");
  }
};

template <typename Params>
const Params* params_of(const loom_op& op) {
  return static_cast<const Params*>(op.params);
}

// MOE_ROUTE, MOE_MATMUL and MOE_SUM (ABI 1.5), for backends with Rules::kMoe.
template <typename Rules, typename NeedSrc, typename Has>
void resolve_moe_op(const OpChecker<Rules>& c, const loom_op& op, typename Rules::OpArgs& a, const NeedSrc& need_src,
                    const Has& has) {
  switch (op.type) {
    case LOOM_OP_MOE_ROUTE: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0 (router logits)");
      a.src[1] = c.tensor(op.src[1], "src1 (ids)");
      a.dst = c.tensor(op.dst, "dst (weights)");
      c.expect_dtype(a.src[0], LOOM_DTYPE_F32, "src0 (router logits)");
      c.expect_dtype(a.src[1], LOOM_DTYPE_I32, "src1 (ids)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst (weights)");
      const int64_t n_tok = a.src[0].ne[1];
      c.expect_shape(a.src[0], a.src[0].ne[0], n_tok, 1, 1, "src0 (router logits)");
      if (!has(offsetof(loom_moe_route_params, scale) + 4)) c.invalid("needs loom_moe_route_params");
      const auto* p = params_of<loom_moe_route_params>(op);
      if (p->n_used < 1 || int64_t(p->n_used) > a.src[0].ne[0])
        c.invalid("n_used " + std::to_string(p->n_used) + " must be in 1..n_expert (" + std::to_string(a.src[0].ne[0]) + ")");
      if (p->gating != LOOM_MOE_GATING_SOFTMAX && p->gating != LOOM_MOE_GATING_SIGMOID && p->gating != LOOM_MOE_GATING_SOFTMAX_CHOSEN)
        c.unsupported("gating " + std::to_string(p->gating) + " is not implemented");
      c.expect_shape(a.src[1], int64_t(p->n_used), n_tok, 1, 1, "src1 (ids)");
      c.expect_shape(a.dst, int64_t(p->n_used), n_tok, 1, 1, "dst (weights)");
      a.params.moe_n_used = p->n_used;
      a.params.moe_gating = p->gating;
      a.params.moe_normalize = p->normalize != 0;
      a.params.scale = p->scale == 0.0f ? 1.0f : p->scale;
      break;
    }
    case LOOM_OP_MOE_MATMUL: {
      need_src(3);
      a.src[0] = c.tensor(op.src[0], "src0 (expert weights)");
      a.src[1] = c.tensor(op.src[1], "src1 (x)");
      a.src[2] = c.tensor(op.src[2], "src2 (ids)");
      a.dst = c.tensor(op.dst, "dst");
      if (!Rules::is_weight_dtype(a.src[0].dtype))
        c.unsupported(std::string("weight dtype ") + Rules::dtype_name(a.src[0].dtype) + " is not implemented");
      c.expect_dtype(a.src[1], LOOM_DTYPE_F32, "src1 (x)");
      c.expect_dtype(a.src[2], LOOM_DTYPE_I32, "src2 (ids)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      const int64_t n_in = a.src[0].ne[0], n_out = a.src[0].ne[1];
      const int64_t n_used = a.src[2].ne[0], n_tok = a.src[2].ne[1];
      c.expect_shape(a.src[0], n_in, n_out, a.src[0].ne[2], 1, "src0 (expert weights)");
      c.expect_shape(a.src[2], n_used, n_tok, 1, 1, "src2 (ids)");
      if (a.src[1].ne[1] != 1) c.expect_shape(a.src[1], n_in, n_used, n_tok, 1, "src1 (x)");
      else c.expect_shape(a.src[1], n_in, 1, n_tok, 1, "src1 (x)");
      c.expect_shape(a.dst, n_out, n_used, n_tok, 1, "dst");
      if (!c.absent(3)) {
        a.src[3] = c.tensor(op.src[3], "src3 (bias)");
        c.expect_dtype(a.src[3], LOOM_DTYPE_F32, "src3 (bias)");
        c.expect_shape(a.src[3], n_out, a.src[0].ne[2], 1, 1, "src3 (bias)");
      }
      break;
    }
    case LOOM_OP_MOE_SUM: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.src[1] = c.tensor(op.src[1], "src1 (weights)");
      a.dst = c.tensor(op.dst, "dst");
      for (const auto* t : {&a.src[0], &a.src[1], &a.dst}) c.expect_dtype(*t, LOOM_DTYPE_F32, t == &a.dst ? "dst" : "src");
      const int64_t ne0 = a.src[0].ne[0], n_used = a.src[0].ne[1], n_tok = a.src[0].ne[2];
      c.expect_shape(a.src[0], ne0, n_used, n_tok, 1, "src0");
      c.expect_shape(a.src[1], n_used, n_tok, 1, 1, "src1 (weights)");
      c.expect_shape(a.dst, ne0, n_tok, 1, 1, "dst");
      break;
    }
    default: break;
  }
}

// SSM_CONV and GATED_DELTA_NET (ABI 1.6), for backends with Rules::kRecurrent. Slots in the seqs
// table are data: the ops check them against the state tensor themselves.
template <typename Rules, typename NeedSrc, typename Has>
void resolve_recurrent_op(const OpChecker<Rules>& c, const loom_op& op, typename Rules::OpArgs& a, const NeedSrc& need_src,
                          const Has& has) {
  auto all_f32 = [&](std::initializer_list<int> srcs, const char* const* roles) {
    int k = 0;
    for (int i : srcs) c.expect_dtype(a.src[i], LOOM_DTYPE_F32, roles[k++]);
    c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
  };
  if (op.type == LOOM_OP_SSM_CONV) {
    need_src(4);
    static const char* const roles[] = {"src0 (x)", "src1 (weight)", "src2 (states)"};
    for (int i = 0; i < 3; ++i) a.src[i] = c.tensor(op.src[i], roles[i]);
    a.src[3] = c.tensor(op.src[3], "src3 (seqs)");
    a.dst = c.tensor(op.dst, "dst");
    all_f32({0, 1, 2}, roles);
    c.expect_dtype(a.src[3], LOOM_DTYPE_I32, "src3 (seqs)");
    const int64_t channels = a.src[0].ne[0], n_tok = a.src[0].ne[1], d_conv = a.src[1].ne[0];
    c.expect_shape(a.src[0], channels, n_tok, 1, 1, "src0 (x)");
    c.expect_shape(a.src[1], d_conv, channels, 1, 1, "src1 (weight)");
    if (d_conv < 2) c.invalid("d_conv (src1 ne[0]) must be at least 2");
    c.expect_shape(a.src[2], d_conv - 1, channels, a.src[2].ne[2], 1, "src2 (states)");
    c.expect_shape(a.src[3], 4, a.src[3].ne[1], 1, 1, "src3 (seqs)");
    c.expect_shape(a.dst, channels, n_tok, 1, 1, "dst");
    return;
  }
  need_src(6);
  static const char* const roles[] = {"src0 (qk)", "src1 (v)", "src2 (g)", "src3 (beta)", "src4 (states)"};
  for (int i = 0; i < 5; ++i) a.src[i] = c.tensor(op.src[i], roles[i]);
  a.src[5] = c.tensor(op.src[5], "src5 (seqs)");
  a.dst = c.tensor(op.dst, "dst");
  all_f32({0, 1, 2, 3, 4}, roles);
  c.expect_dtype(a.src[5], LOOM_DTYPE_I32, "src5 (seqs)");
  const int64_t d_k = a.src[0].ne[0], n_k_heads = a.src[0].ne[1], n_tok = a.src[0].ne[3];
  const int64_t d_v = a.src[1].ne[0], n_v_heads = a.src[1].ne[1];
  c.expect_shape(a.src[0], d_k, n_k_heads, 2, n_tok, "src0 (qk)");
  c.expect_shape(a.src[1], d_v, n_v_heads, n_tok, 1, "src1 (v)");
  if (n_v_heads % n_k_heads != 0)
    c.invalid("n_v_heads (" + std::to_string(n_v_heads) + ") is not a multiple of n_k_heads (" + std::to_string(n_k_heads) + ")");
  c.expect_shape(a.src[2], n_v_heads, n_tok, 1, 1, "src2 (g)");
  c.expect_shape(a.src[3], n_v_heads, n_tok, 1, 1, "src3 (beta)");
  c.expect_shape(a.src[4], d_k, d_v, n_v_heads, a.src[4].ne[3], "src4 (states)");
  c.expect_shape(a.src[5], 4, a.src[5].ne[1], 1, 1, "src5 (seqs)");
  c.expect_shape(a.dst, d_v, n_v_heads, n_tok, 1, "dst");
  if (!has(offsetof(loom_delta_net_params, l2_eps) + 4)) c.invalid("needs loom_delta_net_params");
  const auto* p = params_of<loom_delta_net_params>(op);
  if (!(p->l2_eps >= 0.0f) || !std::isfinite(p->q_scale)) c.invalid("l2_eps must be >= 0 and q_scale finite");
  a.params.delta_q_scale = p->q_scale == 0.0f ? 1.0f / std::sqrt(float(d_k)) : p->q_scale;
  a.params.delta_normalize_qk = p->normalize_qk != 0;
  a.params.delta_l2_eps = p->l2_eps;
  a.params.delta_grouped_heads = has(offsetof(loom_delta_net_params, grouped_heads) + 4) && p->grouped_heads != 0;
}

// LAYER_NORM, ATTENTION, PATCHES and POOL_2D (ABI 1.9), for backends with Rules::kEncoder.
template <typename Rules, typename NeedSrc, typename Has>
void resolve_encoder_op(const OpChecker<Rules>& c, const loom_op& op, typename Rules::OpArgs& a, const NeedSrc& need_src,
                        const Has& has) {
  auto f32 = [&](const typename Rules::Tensor& t, const char* role) { c.expect_dtype(t, LOOM_DTYPE_F32, role); };
  switch (op.type) {
    case LOOM_OP_LAYER_NORM: {
      need_src(1);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.dst = c.tensor(op.dst, "dst");
      f32(a.src[0], "src0");
      f32(a.dst, "dst");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      static const char* const roles[] = {"src1 (weight)", "src2 (bias)"};
      for (uint32_t i = 1; i < 3; i++) {
        if (c.absent(i)) continue;
        a.src[i] = c.tensor(op.src[i], roles[i - 1]);
        f32(a.src[i], roles[i - 1]);
        c.expect_shape(a.src[i], a.src[0].ne[0], 1, 1, 1, roles[i - 1]);
      }
      if (has(offsetof(loom_norm_params, eps) + 4)) a.params.eps = params_of<loom_norm_params>(op)->eps;
      if (!(a.params.eps >= 0.0f)) c.invalid("eps must be >= 0");
      break;
    }
    case LOOM_OP_ATTENTION: {
      need_src(3);
      a.src[0] = c.tensor(op.src[0], "src0 (q)");
      a.src[1] = c.tensor(op.src[1], "src1 (k)");
      a.src[2] = c.tensor(op.src[2], "src2 (v)");
      a.dst = c.tensor(op.dst, "dst");
      const auto& q = a.src[0];
      for (int i = 0; i < 3; i++) f32(a.src[i], i == 0 ? "src0 (q)" : i == 1 ? "src1 (k)" : "src2 (v)");
      f32(a.dst, "dst");
      c.expect_shape(q, q.ne[0], q.ne[1], q.ne[2], 1, "src0 (q)");
      c.expect_shape(a.src[1], q.ne[0], a.src[1].ne[1], q.ne[2], 1, "src1 (k)");
      c.expect_shape(a.src[2], a.src[1].ne, "src2 (v)");
      c.expect_shape(a.dst, q.ne, "dst");
      if (q.ne[1] % a.src[1].ne[1] != 0)
        c.invalid("n_heads (" + std::to_string(q.ne[1]) + ") is not a multiple of n_kv_heads (" + std::to_string(a.src[1].ne[1]) + ")");
      if (!c.absent(3)) {
        a.src[3] = c.tensor(op.src[3], "src3 (seqs)");
        c.expect_dtype(a.src[3], LOOM_DTYPE_I32, "src3 (seqs)");
        c.expect_shape(a.src[3], 2, a.src[3].ne[1], 1, 1, "src3 (seqs)");
      }
      if (!has(offsetof(loom_encoder_attention_params, causal) + 4)) c.invalid("needs loom_encoder_attention_params");
      const auto* p = params_of<loom_encoder_attention_params>(op);
      if (!std::isfinite(p->scale)) c.invalid("scale must be finite");
      a.params.attn_scale = p->scale == 0.0f ? 1.0f / std::sqrt(float(q.ne[0])) : p->scale;
      a.params.causal = p->causal != 0;
      // ABI 1.14: a symmetric sliding window and ALiBi, read only when the caller's struct holds them.
      const uint32_t window = LOOM_HAS_MEMBER(p, loom_encoder_attention_params, window) ? p->window : 0u;
      const float max_bias = LOOM_HAS_MEMBER(p, loom_encoder_attention_params, alibi_max_bias) ? p->alibi_max_bias : 0.0f;
      if (!std::isfinite(max_bias) || max_bias < 0.0f) c.invalid("alibi_max_bias must be finite and >= 0");
      if ((window != 0 || max_bias != 0.0f) && p->causal != 0) c.invalid("window and alibi_max_bias apply to non-causal attention only");
      if constexpr (Rules::kEncoderWindowAlibi) {
        a.params.attn_window = window;
        a.params.alibi_max_bias = max_bias;
      } else {
        if (window != 0) c.unsupported("ATTENTION's sliding window (ABI 1.14) is not implemented by this backend");
        if (max_bias != 0.0f) c.unsupported("ATTENTION's ALiBi (ABI 1.14) is not implemented by this backend");
      }
      break;
    }
    case LOOM_OP_PATCHES:
    case LOOM_OP_POOL_2D: {
      need_src(1);
      const bool patches = op.type == LOOM_OP_PATCHES;
      a.src[0] = c.tensor(op.src[0], patches ? "src0 (image)" : "src0");
      a.dst = c.tensor(op.dst, "dst");
      f32(a.src[0], "src0");
      f32(a.dst, "dst");
      const char* what = patches ? "patch_size" : "kernel";
      if (!has(8)) c.invalid(std::string("needs ") + (patches ? "loom_patch_params" : "loom_pool_params"));
      const uint32_t k = static_cast<const uint32_t*>(op.params)[1];
      if (k == 0) c.invalid(std::string(what) + " must be > 0");
      a.params.window = k;
      const auto& x = a.src[0];
      // PATCHES: x is [width, height, channels]; POOL_2D: [channels, width, height].
      const int64_t w = patches ? x.ne[0] : x.ne[1], h = patches ? x.ne[1] : x.ne[2];
      if (w % k != 0 || h % k != 0)
        c.invalid("the grid " + std::to_string(w) + "x" + std::to_string(h) + " is not a multiple of the " + what + " " + std::to_string(k));
      if (patches) {
        c.expect_shape(x, w, h, x.ne[2], 1, "src0 (image)");
        c.expect_shape(a.dst, int64_t(k) * k * x.ne[2], (w / k) * (h / k), 1, 1, "dst");
      } else {
        c.expect_shape(x, x.ne[0], w, h, 1, "src0");
        c.expect_shape(a.dst, x.ne[0], w / k, h / k, 1, "dst");
      }
      break;
    }
    default: break;
  }
}

// Throws (through Rules) UNSUPPORTED for dtype/op combinations the backend does not implement,
// INVALID_ARGUMENT for inconsistent shapes, strides, params or out-of-bounds views.
// With need_buffers == false only types and shapes are checked (supports_op); no buffer is bound.
template <typename Rules>
typename Rules::OpArgs resolve_op(const loom_op& op, bool need_buffers) {
  using Tensor = typename Rules::Tensor;
  const std::string not_implemented = std::string(" is not implemented by the ") + Rules::kBackendName + " backend";
  const char* name = op_type_name(op.type);
  if (name == nullptr) Rules::unsupported("op type " + std::to_string(op.type) + not_implemented);
  if (op.struct_size < sizeof(loom_op)) Rules::invalid(std::string(name) + ": loom_op.struct_size too small");
  const OpChecker<Rules> c{op, need_buffers, std::string(name) + ": "};
  auto need_src = [&](uint32_t n) {
    if (op.n_src < n || op.n_src > LOOM_OP_MAX_SRC) c.invalid("needs " + std::to_string(n) + " sources, got " + std::to_string(op.n_src));
  };

  typename Rules::OpArgs a;
  a.type = op.type;
  a.n_src = op.n_src;
  const uint32_t params_size = op.params ? *static_cast<const uint32_t*>(op.params) : 0;
  auto has = [&](size_t end) { return op.params != nullptr && params_size >= end; };

  switch (op.type) {
    case LOOM_OP_GET_ROWS: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0 (table)");
      a.src[1] = c.tensor(op.src[1], "src1 (ids)");
      a.dst = c.tensor(op.dst, "dst");
      if (!Rules::is_weight_dtype(a.src[0].dtype)) c.unsupported(std::string("table dtype ") + Rules::dtype_name(a.src[0].dtype) + not_implemented);
      c.expect_dtype(a.src[1], LOOM_DTYPE_I32, "src1 (ids)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      c.expect_shape(a.src[0], a.src[0].ne[0], a.src[0].ne[1], 1, 1, "src0 (table)");
      c.expect_shape(a.src[1], a.src[1].ne[0], 1, 1, 1, "src1 (ids)");
      c.expect_shape(a.dst, a.src[0].ne[0], a.src[1].ne[0], 1, 1, "dst");
      break;
    }
    case LOOM_OP_MATMUL: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0 (weights)");
      a.src[1] = c.tensor(op.src[1], "src1 (x)");
      a.dst = c.tensor(op.dst, "dst");
      if (!Rules::is_weight_dtype(a.src[0].dtype)) c.unsupported(std::string("weight dtype ") + Rules::dtype_name(a.src[0].dtype) + not_implemented);
      c.expect_dtype(a.src[1], LOOM_DTYPE_F32, "src1 (x)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      c.expect_shape(a.src[0], a.src[0].ne[0], a.src[0].ne[1], 1, 1, "src0 (weights)");
      c.expect_shape(a.src[1], a.src[0].ne[0], a.src[1].ne[1], a.src[1].ne[2], a.src[1].ne[3], "src1 (x)");
      c.expect_shape(a.dst, a.src[0].ne[1], a.src[1].ne[1], a.src[1].ne[2], a.src[1].ne[3], "dst");
      break;
    }
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.src[1] = c.tensor(op.src[1], "src1");
      a.dst = c.tensor(op.dst, "dst");
      for (const Tensor* t : {&a.src[0], &a.src[1], &a.dst}) c.expect_dtype(*t, LOOM_DTYPE_F32, t == &a.dst ? "dst" : "src");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      if (a.src[1].n_rows() != 1) c.expect_shape(a.src[1], a.src[0].ne, "src1 (same shape or one row)");
      else if (a.src[1].ne[0] != a.src[0].ne[0]) c.expect_shape(a.src[1], a.src[0].ne[0], 1, 1, 1, "src1 (broadcast row)");
      break;
    }
    case LOOM_OP_LORA: {
      if constexpr (!Rules::kLora) c.unsupported(std::string("LORA (ABI 1.16, run-time adapters) is not implemented by the ") + Rules::kBackendName + " backend");
      need_src(5);
      a.src[0] = c.tensor(op.src[0], "src0 (A)");
      a.src[1] = c.tensor(op.src[1], "src1 (B)");
      a.src[2] = c.tensor(op.src[2], "src2 (x)");
      a.src[3] = c.tensor(op.src[3], "src3 (slots)");
      a.src[4] = c.tensor(op.src[4], "src4 (scales)");
      a.dst = c.tensor(op.dst, "dst");
      for (const auto* t : {&a.src[0], &a.src[1]})
        if (t->dtype != LOOM_DTYPE_F32 && t->dtype != LOOM_DTYPE_F16)
          c.unsupported(std::string(t == &a.src[0] ? "src0 (A)" : "src1 (B)") + " must be F32 or F16, got " + Rules::dtype_name(t->dtype));
      c.expect_dtype(a.src[2], LOOM_DTYPE_F32, "src2 (x)");
      c.expect_dtype(a.src[3], LOOM_DTYPE_I32, "src3 (slots)");
      c.expect_dtype(a.src[4], LOOM_DTYPE_F32, "src4 (scales)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      const int64_t n_in = a.src[0].ne[0], rank = a.src[0].ne[1], n_slots = a.src[0].ne[2];
      const int64_t n_out = a.src[1].ne[0], n_tok = a.src[2].ne[1];
      c.expect_shape(a.src[1], n_out, rank, n_slots, 1, "src1 (B, transposed)");
      c.expect_shape(a.src[2], n_in, n_tok, 1, 1, "src2 (x)");
      c.expect_shape(a.src[3], n_tok, 1, 1, 1, "src3 (slots)");
      c.expect_shape(a.src[4], n_slots, 1, 1, 1, "src4 (scales)");
      c.expect_shape(a.dst, n_out, n_tok, 1, 1, "dst");
      break;
    }
    case LOOM_OP_SCALE:
    case LOOM_OP_UNARY:
    case LOOM_OP_CLAMP:
    case LOOM_OP_SOFTMAX:
    case LOOM_OP_RMS_NORM: {
      need_src(1);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.dst = c.tensor(op.dst, "dst");
      c.expect_dtype(a.src[0], LOOM_DTYPE_F32, "src0");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      if (op.type == LOOM_OP_RMS_NORM && !c.absent(1)) {  // the weight is optional
        a.src[1] = c.tensor(op.src[1], "src1 (weight)");
        c.expect_dtype(a.src[1], LOOM_DTYPE_F32, "src1 (weight)");
        c.expect_shape(a.src[1], a.src[0].ne[0], 1, 1, 1, "src1 (weight)");
      }
      if (op.type == LOOM_OP_SCALE && has(offsetof(loom_scale_params, scale) + 4))
        a.params.scale = params_of<loom_scale_params>(op)->scale;
      if (op.type == LOOM_OP_RMS_NORM && has(offsetof(loom_norm_params, eps) + 4)) {
        a.params.eps = params_of<loom_norm_params>(op)->eps;
        if (!(a.params.eps >= 0.0f)) c.invalid("eps must be >= 0");
      }
      if (op.type == LOOM_OP_UNARY) {
        if (!has(offsetof(loom_glu_params, activation) + 4)) c.invalid("needs loom_glu_params with an activation");
        a.params.activation = params_of<loom_glu_params>(op)->activation;
      }
      if (op.type == LOOM_OP_CLAMP) {
        if constexpr (Rules::kClamp) {
          if (!has(offsetof(loom_clamp_params, max) + 4)) c.invalid("needs loom_clamp_params");
          const auto* p = params_of<loom_clamp_params>(op);
          if (!(p->min <= p->max)) c.invalid("min must not exceed max (and neither may be NaN)");
          a.params.clamp_min = p->min;
          a.params.clamp_max = p->max;
        } else {
          c.unsupported(std::string("CLAMP (ABI 1.11) is not implemented by the ") + Rules::kBackendName + " backend");
        }
      }
      break;
    }
    case LOOM_OP_GLU: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0 (gate)");
      a.src[1] = c.tensor(op.src[1], "src1 (up)");
      a.dst = c.tensor(op.dst, "dst");
      for (const Tensor* t : {&a.src[0], &a.src[1], &a.dst}) c.expect_dtype(*t, LOOM_DTYPE_F32, t == &a.dst ? "dst" : "src");
      c.expect_shape(a.src[1], a.src[0].ne, "src1 (up)");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      if (!has(offsetof(loom_glu_params, activation) + 4)) c.invalid("needs loom_glu_params with an activation");
      a.params.activation = params_of<loom_glu_params>(op)->activation;
      break;
    }
    case LOOM_OP_COPY: {
      need_src(1);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.dst = c.tensor(op.dst, "dst");
      for (const Tensor* t : {&a.src[0], &a.dst})
        if (t->dtype != LOOM_DTYPE_F32 && t->dtype != LOOM_DTYPE_F16 && t->dtype != LOOM_DTYPE_BF16)
          c.unsupported(std::string("converts only between F32, F16 and BF16, got ") + Rules::dtype_name(t->dtype));
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      break;
    }
    case LOOM_OP_ROPE: {
      need_src(2);
      a.src[0] = c.tensor(op.src[0], "src0 (x)");
      a.src[1] = c.tensor(op.src[1], "src1 (positions)");
      a.dst = c.tensor(op.dst, "dst");
      c.expect_dtype(a.src[0], LOOM_DTYPE_F32, "src0 (x)");
      c.expect_dtype(a.src[1], LOOM_DTYPE_I32, "src1 (positions)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      c.expect_shape(a.src[0], a.src[0].ne[0], a.src[0].ne[1], a.src[0].ne[2], 1, "src0 (x)");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      if (!has(offsetof(loom_rope_params, freq_scale) + 4)) c.invalid("needs loom_rope_params");
      const auto* p = params_of<loom_rope_params>(op);
      const bool freq_factors = (p->mode & LOOM_ROPE_FREQ_FACTORS) != 0;
      const bool yarn = (p->mode & LOOM_ROPE_YARN) != 0;
      const bool mrope = (p->mode & LOOM_ROPE_MROPE) != 0;
      const bool interleaved = (p->mode & LOOM_ROPE_MROPE_INTERLEAVED) != 0;
      const loom_rope_mode mode = p->mode & ~(LOOM_ROPE_FREQ_FACTORS | LOOM_ROPE_YARN | LOOM_ROPE_MROPE | LOOM_ROPE_MROPE_INTERLEAVED);
      if (interleaved && !mrope) c.invalid("LOOM_ROPE_MROPE_INTERLEAVED goes with LOOM_ROPE_MROPE");
      if (!mrope) {
        c.expect_shape(a.src[1], a.src[0].ne[2], 1, 1, 1, "src1 (positions)");
      } else if constexpr (Rules::kRopeMrope) {
        c.expect_shape(a.src[1], a.src[0].ne[2], 4, 1, 1, "src1 (positions, 4 components per token)");
        if (!has(offsetof(loom_rope_params, sections) + 16)) c.invalid("LOOM_ROPE_MROPE needs the ABI 1.12 loom_rope_params");
        if (mode != LOOM_ROPE_NEOX) c.invalid("LOOM_ROPE_MROPE applies to the NEOX mode");
        int64_t total = 0;
        for (int k = 0; k < 4; k++) {
          if (p->sections[k] < 0) c.invalid("sections must be >= 0");
          total += p->sections[k];
          a.params.sections[k] = p->sections[k];
        }
        if (total <= 0) c.invalid("sections must sum to more than 0");
        a.params.mrope = true;
        if constexpr (Rules::kRopeMropeInterleaved) {
          a.params.mrope_interleaved = interleaved;
        } else {
          if (interleaved) c.unsupported("interleaved M-RoPE (LOOM_ROPE_MROPE_INTERLEAVED, ABI 1.13) is not implemented by this backend");
        }
      } else {
        c.unsupported("multi-section rope (LOOM_ROPE_MROPE, ABI 1.12) is not implemented by this backend");
      }
      a.params.rope_mode = mode;
      a.params.n_dims = p->n_dims == 0 ? uint32_t(a.src[0].ne[0]) : p->n_dims;
      a.params.freq_base = p->freq_base;
      a.params.freq_scale = p->freq_scale == 0.0f ? 1.0f : p->freq_scale;
      if (mode != LOOM_ROPE_NORMAL && mode != LOOM_ROPE_NEOX) c.unsupported("rope mode " + std::to_string(p->mode) + " is not implemented");
      if (a.params.n_dims % 2 != 0 || a.params.n_dims > uint64_t(a.src[0].ne[0])) c.invalid("n_dims must be even and <= head_dim");
      if (freq_factors) {
        if constexpr (Rules::kRopeFreqFactors) {
          need_src(3);
          a.src[2] = c.tensor(op.src[2], "src2 (freq_factors)");
          c.expect_dtype(a.src[2], LOOM_DTYPE_F32, "src2 (freq_factors)");
          c.expect_shape(a.src[2], int64_t(a.params.n_dims / 2), 1, 1, 1, "src2 (freq_factors)");
          a.params.rope_freq_factors = true;
        } else {
          c.unsupported("rope frequency factors (LOOM_ROPE_FREQ_FACTORS) are not implemented by this backend");
        }
      }
      if (yarn) {
        if constexpr (Rules::kRopeYarn) {
          if (!has(offsetof(loom_rope_params, yarn_corr_dims) + 8)) c.invalid("LOOM_ROPE_YARN needs the ABI 1.2 loom_rope_params");
          if (!(p->yarn_ext_factor >= 0.0f && p->yarn_ext_factor <= 1.0f)) c.invalid("yarn_ext_factor must be in 0..1");
          if (!(p->yarn_corr_dims[0] >= 0.0f && p->yarn_corr_dims[1] >= p->yarn_corr_dims[0])) {
            c.invalid("yarn_corr_dims must be 0 <= low <= high");
          }
          a.params.yarn_ext_factor = p->yarn_ext_factor;
          a.params.yarn_corr_low = p->yarn_corr_dims[0];
          a.params.yarn_corr_high = p->yarn_corr_dims[1];
        } else {
          c.unsupported("YaRN rope scaling (LOOM_ROPE_YARN) is not implemented by this backend");
        }
      }
      if (!(p->freq_base > 0.0f)) c.invalid("freq_base must be > 0");
      break;
    }
    case LOOM_OP_STORE_KV: {
      need_src(5);
      a.src[0] = c.tensor(op.src[0], "src0 (k)");
      a.src[1] = c.tensor(op.src[1], "src1 (v)");
      a.src[2] = c.tensor(op.src[2], "src2 (slot_mapping)");
      a.src[3] = c.tensor(op.src[3], "src3 (k_cache)");
      a.src[4] = c.tensor(op.src[4], "src4 (v_cache)");
      c.expect_dtype(a.src[0], LOOM_DTYPE_F32, "src0 (k)");
      c.expect_dtype(a.src[1], LOOM_DTYPE_F32, "src1 (v)");
      c.expect_dtype(a.src[2], LOOM_DTYPE_I32, "src2 (slot_mapping)");
      const Tensor& k = a.src[0];
      c.expect_shape(k, k.ne[0], k.ne[1], k.ne[2], 1, "src0 (k)");
      c.expect_shape(a.src[1], k.ne, "src1 (v)");
      c.expect_shape(a.src[2], k.ne[2], 1, 1, 1, "src2 (slot_mapping)");
      for (int i = 3; i < 5; i++) {
        const char* role = i == 3 ? "src3 (k_cache)" : "src4 (v_cache)";
        c.expect_kv_dtype(a.src[i], role);
        c.expect_shape(a.src[i], k.ne[0], k.ne[1], a.src[3].ne[2], 1, role);
        Rules::check_kv_cache(c, a.src[i], role);
      }
      Rules::check_kv_pair(c, a.src[3], a.src[4]);
      break;
    }
    case LOOM_OP_PAGED_ATTENTION: {
      need_src(5);
      a.src[0] = c.tensor(op.src[0], "src0 (q)");
      a.src[1] = c.tensor(op.src[1], "src1 (k_cache)");
      a.src[2] = c.tensor(op.src[2], "src2 (v_cache)");
      a.src[3] = c.tensor(op.src[3], "src3 (block_tables)");
      a.src[4] = c.tensor(op.src[4], "src4 (seqs)");
      a.dst = c.tensor(op.dst, "dst");
      const Tensor& q = a.src[0];
      c.expect_dtype(q, LOOM_DTYPE_F32, "src0 (q)");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      c.expect_dtype(a.src[3], LOOM_DTYPE_I32, "src3 (block_tables)");
      c.expect_dtype(a.src[4], LOOM_DTYPE_I32, "src4 (seqs)");
      c.expect_shape(q, q.ne[0], q.ne[1], q.ne[2], 1, "src0 (q)");
      c.expect_shape(a.dst, q.ne, "dst");
      for (int i = 1; i < 3; i++) {
        const char* role = i == 1 ? "src1 (k_cache)" : "src2 (v_cache)";
        c.expect_kv_dtype(a.src[i], role);
        c.expect_shape(a.src[i], q.ne[0], a.src[1].ne[1], a.src[1].ne[2], 1, role);
        Rules::check_kv_cache(c, a.src[i], role);
      }
      Rules::check_kv_pair(c, a.src[1], a.src[2]);
      if (q.ne[1] % a.src[1].ne[1] != 0)
        c.invalid("n_heads (" + std::to_string(q.ne[1]) + ") is not a multiple of n_kv_heads (" + std::to_string(a.src[1].ne[1]) + ")");
      const int64_t n_seqs = a.src[4].ne[1];
      c.expect_shape(a.src[4], 4, n_seqs, 1, 1, "src4 (seqs)");
      c.expect_shape(a.src[3], a.src[3].ne[0], n_seqs, 1, 1, "src3 (block_tables)");
      if (!has(offsetof(loom_attention_params, softcap) + 4)) c.invalid("needs loom_attention_params");
      const auto* p = params_of<loom_attention_params>(op);
      a.params.attn_scale = p->scale == 0.0f ? 1.0f / std::sqrt(float(q.ne[0])) : p->scale;
      a.params.block_size = p->block_size;
      a.params.sliding_window = p->sliding_window;
      a.params.softcap = p->softcap;
      if (p->block_size == 0) c.invalid("block_size must be > 0");
      if (p->flags & ~LOOM_ATTENTION_SEQ_FLAGS) c.unsupported("attention flags " + std::to_string(p->flags) + " are not implemented");
      if (p->flags & LOOM_ATTENTION_SEQ_FLAGS) {
        if constexpr (Rules::kSeqFlags) {
          a.params.seq_flags = true;
        } else {
          c.unsupported("per-sequence flags (LOOM_ATTENTION_SEQ_FLAGS, ABI 1.9: non-causal sequences) are not implemented by the " +
                        std::string(Rules::kBackendName) + " backend");
        }
      }
      if (!(p->softcap >= 0.0f)) c.invalid("softcap must be >= 0");
      if (!c.absent(5)) {  // sinks are optional
        if constexpr (Rules::kAttentionSinks) {
          a.src[5] = c.tensor(op.src[5], "src5 (sinks)");
          c.expect_dtype(a.src[5], LOOM_DTYPE_F32, "src5 (sinks)");
          c.expect_shape(a.src[5], q.ne[1], 1, 1, 1, "src5 (sinks)");
        } else {
          c.unsupported("attention sinks (src5, ABI 1.5) are not implemented by this backend");
        }
      }
      Rules::check_attention(c, a);
      break;
    }
    case LOOM_OP_MOE_ROUTE:
    case LOOM_OP_MOE_MATMUL:
    case LOOM_OP_MOE_SUM: {
      if constexpr (Rules::kMoe) {
        resolve_moe_op(c, op, a, need_src, has);
      } else {
        c.unsupported(std::string("the mixture-of-experts ops (ABI 1.5) are not implemented by the ") + Rules::kBackendName + " backend");
      }
      break;
    }
    case LOOM_OP_SSM_CONV:
    case LOOM_OP_GATED_DELTA_NET: {
      if constexpr (Rules::kRecurrent) {
        resolve_recurrent_op(c, op, a, need_src, has);
      } else {
        c.unsupported(std::string("the recurrent ops (ABI 1.6, Gated DeltaNet layers) are not implemented by the ") + Rules::kBackendName + " backend");
      }
      break;
    }
    case LOOM_OP_LAYER_NORM:
    case LOOM_OP_ATTENTION:
    case LOOM_OP_PATCHES:
    case LOOM_OP_POOL_2D: {
      if constexpr (Rules::kEncoder) {
        resolve_encoder_op(c, op, a, need_src, has);
      } else {
        c.unsupported(std::string("the encoder ops (ABI 1.9) are not implemented by the ") + Rules::kBackendName + " backend");
      }
      break;
    }
    default: Rules::unsupported("op type " + std::to_string(op.type) + not_implemented);
  }
  if (op.type == LOOM_OP_GLU && a.params.activation == LOOM_ACTIVATION_SWIGLU_OAI) {
    if (!Rules::kSwigluOai) c.unsupported("activation SWIGLU_OAI (ABI 1.5) is not implemented by this backend");
  } else if (a.params.activation == LOOM_ACTIVATION_SIGMOID && (op.type == LOOM_OP_UNARY || op.type == LOOM_OP_GLU)) {
    if (!Rules::kSigmoid) c.unsupported("activation SIGMOID (ABI 1.5) is not implemented by this backend");
  } else if (a.params.activation == LOOM_ACTIVATION_SOFTPLUS && (op.type == LOOM_OP_UNARY || op.type == LOOM_OP_GLU)) {
    if (!Rules::kSoftplus) c.unsupported("activation SOFTPLUS (ABI 1.6) is not implemented by this backend");
  } else if (a.params.activation == LOOM_ACTIVATION_GELU_QUICK && (op.type == LOOM_OP_UNARY || op.type == LOOM_OP_GLU)) {
    if (!Rules::kGeluQuick) c.unsupported("activation GELU_QUICK (ABI 1.10) is not implemented by this backend");
  } else if (op.type == LOOM_OP_UNARY || op.type == LOOM_OP_GLU) {
    const loom_activation act = a.params.activation;
    if (act != LOOM_ACTIVATION_SILU && act != LOOM_ACTIVATION_GELU_TANH && act != LOOM_ACTIVATION_GELU_ERF && act != LOOM_ACTIVATION_RELU)
      c.unsupported("activation " + std::to_string(act) + " is not implemented");
  }
  return a;
}

}  // namespace loom::plugin_support
