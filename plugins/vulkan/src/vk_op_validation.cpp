// Op validation shared by supports_op and run_ops: after resolve_op returns, an op implementation
// may index every element of every operand without further bounds checks (data-dependent indices
// such as row ids, slots and block tables are checked by the ops themselves).
#include <algorithm>

#include "vk_tensor.h"

#include <cmath>
#include <sstream>

namespace loom::vk {
namespace {

const char* op_name(loom_op_type type) {
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
    default: return nullptr;
  }
}

std::string shape_str(const int64_t* ne) {
  std::ostringstream s;
  s << "[" << ne[0] << ", " << ne[1] << ", " << ne[2] << ", " << ne[3] << "]";
  return s.str();
}

struct Checker {
  const loom_op& op;
  bool need_buffers;
  std::string prefix;

  [[noreturn]] void fail(const std::string& what) const { invalid(prefix + what); }

  // Validates one operand's shape, strides and bounds into a Tensor.
  Tensor tensor(const loom_tensor& t, const char* role, bool optional = false) const {
    Tensor out;
    if (t.struct_size < sizeof(loom_tensor)) fail(std::string(role) + ": loom_tensor.struct_size too small");
    out.dtype = t.dtype;
    out.offset = t.offset;
    for (int i = 0; i < 4; i++) {
      out.ne[i] = t.ne[i];
      out.nb[i] = t.nb[i];
    }
    if (need_buffers && t.buffer == nullptr) {
      if (optional) return Tensor{};
      fail(std::string(role) + " has no buffer");
    }
    const TypeLayout layout = type_layout(t.dtype);
    if (layout.block_elems == 0) unsupported(prefix + role + " dtype " + dtype_name(t.dtype) + " is not supported by the vulkan backend");
    for (int i = 0; i < 4; i++)
      if (t.ne[i] < 1 || t.ne[i] > (int64_t(1) << 31)) fail(std::string(role) + " has invalid shape " + shape_str(t.ne));
    if (t.ne[0] % layout.block_elems != 0)
      fail(std::string(role) + " ne[0]=" + std::to_string(t.ne[0]) + " is not a multiple of the " + dtype_name(t.dtype) +
           " block size " + std::to_string(layout.block_elems));
    const uint64_t rb = row_bytes(t.dtype, t.ne[0]);
    const bool nb0_ok = t.nb[0] == layout.block_bytes || (t.dtype == LOOM_DTYPE_INT8_KV && t.nb[0] == rb);
    if (!nb0_ok) fail(std::string(role) + " nb[0]=" + std::to_string(t.nb[0]) + " must be the element/block size " + std::to_string(layout.block_bytes) + " (rows must be contiguous)");
    if (t.ne[1] > 1 && t.nb[1] < rb) fail(std::string(role) + " nb[1]=" + std::to_string(t.nb[1]) + " is smaller than a row (" + std::to_string(rb) + " bytes)");
    // Shaders address operands in bytes with 32-bit arithmetic and read whole words: strides must
    // fit in 32 bits and keep the element alignment (4 for 32-bit data, 2 for 16-bit and blocks).
    const uint64_t align = (t.dtype == LOOM_DTYPE_F32 || t.dtype == LOOM_DTYPE_I32 || t.dtype == LOOM_DTYPE_INT8_KV) ? 4 : 2;
    for (int i = 1; i < 4; i++) {
      if (t.ne[i] == 1) continue;
      if (t.nb[i] % align != 0) unsupported(prefix + role + " nb[" + std::to_string(i) + "]=" + std::to_string(t.nb[i]) + " is not a multiple of " + std::to_string(align) + " bytes");
      if (t.nb[i] > 0xffffffffull) unsupported(prefix + role + " nb[" + std::to_string(i) + "] does not fit in 32 bits");
    }
    // extent = row bytes + sum((ne[i]-1) * nb[i]), with overflow checks.
    uint64_t extent = rb;
    for (int i = 1; i < 4; i++) {
      uint64_t term;
      if (__builtin_mul_overflow(uint64_t(t.ne[i] - 1), t.nb[i], &term) || __builtin_add_overflow(extent, term, &extent))
        fail(std::string(role) + " strides overflow");
    }
    out.extent = extent;
    if (!need_buffers) return out;
    const loom_buffer* buffer = t.buffer;
    if (buffer->magic != kBufferMagic) fail(std::string(role) + " buffer is not a live vulkan backend buffer");
    uint64_t end;
    if (__builtin_add_overflow(extent, t.offset, &end) || end > buffer->size)
      fail(std::string(role) + " view (offset " + std::to_string(t.offset) + " + extent " + std::to_string(extent) +
           " bytes) exceeds its buffer of " + std::to_string(buffer->size) + " bytes");
    if (t.offset % align != 0) unsupported(prefix + role + " offset " + std::to_string(t.offset) + " is not a multiple of " + std::to_string(align) + " bytes");
    out.buffer = buffer;
    out.present = true;
    return out;
  }

  void expect_dtype(const Tensor& t, loom_dtype dtype, const char* role) const {
    if (t.dtype != dtype)
      unsupported(prefix + role + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
  }
  void expect_shape(const Tensor& t, const int64_t* ne, const char* role) const {
    for (int i = 0; i < 4; i++)
      if (t.ne[i] != ne[i]) fail(std::string(role) + " has shape " + shape_str(t.ne) + ", expected " + shape_str(ne));
  }
  void expect_shape(const Tensor& t, int64_t a, int64_t b, int64_t c, int64_t d, const char* role) const {
    const int64_t ne[4] = {a, b, c, d};
    expect_shape(t, ne, role);
  }
};

template <typename T>
const T* params_of(const loom_op& op) {
  return static_cast<const T*>(op.params);
}

// Cache rows are read and written as whole words (F16 in pairs, INT8_KV in fours after the scale).
void check_kv_layout(const Checker& c, const Tensor& cache, const char* role) {
  if (cache.ne[0] > kMaxHeadDim) unsupported(c.prefix + role + " head_dim " + std::to_string(cache.ne[0]) + " exceeds " + std::to_string(kMaxHeadDim));
  for (int i = 1; i < 3; i++)
    if (cache.ne[i] > 1 && cache.nb[i] % 4 != 0) unsupported(c.prefix + role + " strides must be multiples of 4 bytes");
  if (cache.offset % 4 != 0) unsupported(c.prefix + role + " offset must be a multiple of 4 bytes");
  if (cache.dtype == LOOM_DTYPE_F16 && cache.ne[0] % 2 != 0) unsupported(c.prefix + role + " F16 cache needs an even head_dim");
  if (cache.dtype == LOOM_DTYPE_INT8_KV && cache.ne[0] % 4 != 0) unsupported(c.prefix + role + " INT8_KV cache needs head_dim % 4 == 0");
}

}  // namespace

OpArgs resolve_op(const loom_op& op, bool need_buffers) {
  const char* name = op_name(op.type);
  if (name == nullptr) unsupported("op type " + std::to_string(op.type) + " is not implemented by the vulkan backend");
  if (op.struct_size < sizeof(loom_op)) invalid(std::string(name) + ": loom_op.struct_size too small");
  Checker c{op, need_buffers, std::string(name) + ": "};
  auto need_src = [&](uint32_t n) {
    if (op.n_src < n || op.n_src > LOOM_OP_MAX_SRC) c.fail("needs " + std::to_string(n) + " sources, got " + std::to_string(op.n_src));
  };

  OpArgs a;
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
      if (!is_weight_dtype(a.src[0].dtype)) unsupported(c.prefix + "table dtype " + dtype_name(a.src[0].dtype) + " is not implemented by the vulkan backend");
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
      if (!is_weight_dtype(a.src[0].dtype)) unsupported(c.prefix + "weight dtype " + dtype_name(a.src[0].dtype) + " is not implemented by the vulkan backend");
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
    case LOOM_OP_SCALE:
    case LOOM_OP_UNARY:
    case LOOM_OP_SOFTMAX:
    case LOOM_OP_RMS_NORM: {
      need_src(1);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.dst = c.tensor(op.dst, "dst");
      c.expect_dtype(a.src[0], LOOM_DTYPE_F32, "src0");
      c.expect_dtype(a.dst, LOOM_DTYPE_F32, "dst");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      if (op.type == LOOM_OP_RMS_NORM && op.n_src >= 2) {
        // An absent weight has a NULL buffer (run) or, when only shapes are asked, ne[0] == 0.
        const bool absent = need_buffers ? op.src[1].buffer == nullptr : op.src[1].ne[0] == 0;
        if (!absent) {
          a.src[1] = c.tensor(op.src[1], "src1 (weight)");
          c.expect_dtype(a.src[1], LOOM_DTYPE_F32, "src1 (weight)");
          c.expect_shape(a.src[1], a.src[0].ne[0], 1, 1, 1, "src1 (weight)");
        }
      }
      if (op.type == LOOM_OP_SCALE && has(offsetof(loom_scale_params, scale) + 4))
        a.params.scale = params_of<loom_scale_params>(op)->scale;
      if (op.type == LOOM_OP_RMS_NORM && has(offsetof(loom_norm_params, eps) + 4)) {
        a.params.eps = params_of<loom_norm_params>(op)->eps;
        if (!(a.params.eps >= 0.0f)) c.fail("eps must be >= 0");
      }
      if (op.type == LOOM_OP_UNARY) {
        if (!has(offsetof(loom_glu_params, activation) + 4)) c.fail("needs loom_glu_params with an activation");
        a.params.activation = params_of<loom_glu_params>(op)->activation;
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
      if (!has(offsetof(loom_glu_params, activation) + 4)) c.fail("needs loom_glu_params with an activation");
      a.params.activation = params_of<loom_glu_params>(op)->activation;
      break;
    }
    case LOOM_OP_COPY: {
      need_src(1);
      a.src[0] = c.tensor(op.src[0], "src0");
      a.dst = c.tensor(op.dst, "dst");
      for (const Tensor* t : {&a.src[0], &a.dst})
        if (t->dtype != LOOM_DTYPE_F32 && t->dtype != LOOM_DTYPE_F16 && t->dtype != LOOM_DTYPE_BF16)
          unsupported(c.prefix + "converts only between F32, F16 and BF16, got " + dtype_name(t->dtype));
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
      c.expect_shape(a.src[1], a.src[0].ne[2], 1, 1, 1, "src1 (positions)");
      c.expect_shape(a.dst, a.src[0].ne, "dst");
      if (!has(offsetof(loom_rope_params, freq_scale) + 4)) c.fail("needs loom_rope_params");
      const auto* p = params_of<loom_rope_params>(op);
      a.params.rope_mode = p->mode;
      a.params.n_dims = p->n_dims == 0 ? uint32_t(a.src[0].ne[0]) : p->n_dims;
      a.params.freq_base = p->freq_base;
      a.params.freq_scale = p->freq_scale == 0.0f ? 1.0f : p->freq_scale;
      if (p->mode != LOOM_ROPE_NORMAL && p->mode != LOOM_ROPE_NEOX) unsupported(c.prefix + "rope mode " + std::to_string(p->mode) + " is not implemented");
      if (a.params.n_dims % 2 != 0 || a.params.n_dims > uint64_t(a.src[0].ne[0])) c.fail("n_dims must be even and <= head_dim");
      if (!(p->freq_base > 0.0f)) c.fail("freq_base must be > 0");
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
        if (!is_kv_dtype(a.src[i].dtype)) unsupported(c.prefix + role + " dtype " + dtype_name(a.src[i].dtype) + " is not a KV cache type (F32, F16, INT8_KV)");
        c.expect_shape(a.src[i], k.ne[0], k.ne[1], a.src[3].ne[2], 1, role);
        check_kv_layout(c, a.src[i], role);
      }
      if (a.src[3].dtype != a.src[4].dtype) unsupported(c.prefix + "k_cache and v_cache must have the same dtype");
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
        if (!is_kv_dtype(a.src[i].dtype)) unsupported(c.prefix + role + " dtype " + dtype_name(a.src[i].dtype) + " is not a KV cache type (F32, F16, INT8_KV)");
        c.expect_shape(a.src[i], q.ne[0], a.src[1].ne[1], a.src[1].ne[2], 1, role);
        check_kv_layout(c, a.src[i], role);
      }
      if (a.src[1].dtype != a.src[2].dtype) unsupported(c.prefix + "k_cache and v_cache must have the same dtype");
      if (q.ne[1] % a.src[1].ne[1] != 0) c.fail("n_heads (" + std::to_string(q.ne[1]) + ") is not a multiple of n_kv_heads (" + std::to_string(a.src[1].ne[1]) + ")");
      const int64_t n_seqs = a.src[4].ne[1];
      c.expect_shape(a.src[4], 4, n_seqs, 1, 1, "src4 (seqs)");
      c.expect_shape(a.src[3], a.src[3].ne[0], n_seqs, 1, 1, "src3 (block_tables)");
      if (!has(offsetof(loom_attention_params, softcap) + 4)) c.fail("needs loom_attention_params");
      const auto* p = params_of<loom_attention_params>(op);
      a.params.attn_scale = p->scale == 0.0f ? 1.0f / std::sqrt(float(q.ne[0])) : p->scale;
      a.params.block_size = p->block_size;
      a.params.sliding_window = p->sliding_window;
      a.params.softcap = p->softcap;
      if (p->block_size == 0) c.fail("block_size must be > 0");
      if (!(p->softcap >= 0.0f)) c.fail("softcap must be >= 0");
      break;
    }
    default: unsupported("op type " + std::to_string(op.type) + " is not implemented by the vulkan backend");
  }
  if (op.type == LOOM_OP_UNARY || op.type == LOOM_OP_GLU) {
    const loom_activation act = a.params.activation;
    if (act != LOOM_ACTIVATION_SILU && act != LOOM_ACTIVATION_GELU_TANH && act != LOOM_ACTIVATION_GELU_ERF && act != LOOM_ACTIVATION_RELU)
      unsupported(c.prefix + "activation " + std::to_string(act) + " is not implemented");
  }
  return a;
}

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
    case LOOM_DTYPE_INT8_KV: return {1, 1};
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
    case LOOM_DTYPE_INT8_KV: return "INT8_KV";
    case LOOM_DTYPE_I8_ROW: return "I8_ROW";
    case LOOM_DTYPE_I4_G128: return "I4_G128";
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
    case LOOM_DTYPE_Q8_0:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q6_K: return true;
    default: return false;
  }
}

bool is_kv_dtype(loom_dtype type) { return type == LOOM_DTYPE_F32 || type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_INT8_KV; }

}  // namespace loom::vk
