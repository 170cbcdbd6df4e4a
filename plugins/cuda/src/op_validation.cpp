// Op validation shared by supports_op and run_ops: after resolve_op returns, an op implementation
// may index every element of every operand without further bounds checks (data-dependent indices
// such as row ids, slots and block tables are checked by the ops themselves).
#include "op_validation.h"

#include "kernels.h"

#include <cmath>
#include <sstream>

namespace loom::cuda {
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

  // Validates one operand's shape, strides and bounds into a DevTensor.
  DevTensor tensor(const loom_tensor& t, const char* role, bool optional = false) const {
    DevTensor out;
    if (t.struct_size < sizeof(loom_tensor)) fail(std::string(role) + ": loom_tensor.struct_size too small");
    out.dtype = t.dtype;
    for (int i = 0; i < 4; i++) {
      out.ne[i] = t.ne[i];
      out.nb[i] = t.nb[i];
    }
    if (need_buffers && t.buffer == nullptr) {
      if (optional) return DevTensor{};
      fail(std::string(role) + " has no buffer");
    }
    const TypeLayout layout = type_layout(t.dtype);
    if (layout.block_elems == 0) unsupported(prefix + role + " dtype " + dtype_name(t.dtype) + " is not supported by the cuda backend");
    for (int i = 0; i < 4; i++)
      if (t.ne[i] < 1 || t.ne[i] > (int64_t(1) << 40)) fail(std::string(role) + " has invalid shape " + shape_str(t.ne));
    if (t.ne[0] % layout.block_elems != 0)
      fail(std::string(role) + " ne[0]=" + std::to_string(t.ne[0]) + " is not a multiple of the " + dtype_name(t.dtype) +
           " block size " + std::to_string(layout.block_elems));
    const uint64_t rb = row_bytes(t.dtype, t.ne[0]);
    const bool nb0_ok = t.nb[0] == layout.block_bytes || (t.dtype == LOOM_DTYPE_INT8_KV && t.nb[0] == rb);
    if (!nb0_ok) fail(std::string(role) + " nb[0]=" + std::to_string(t.nb[0]) + " must be the element/block size " + std::to_string(layout.block_bytes) + " (rows must be contiguous)");
    if (t.ne[1] > 1 && t.nb[1] < rb) fail(std::string(role) + " nb[1]=" + std::to_string(t.nb[1]) + " is smaller than a row (" + std::to_string(rb) + " bytes)");
    if (!need_buffers) return out;
    const loom_buffer* buffer = t.buffer;
    if (buffer->magic != kBufferMagic) fail(std::string(role) + " buffer is not a live cuda backend buffer");
    // extent = offset + row bytes + sum((ne[i]-1) * nb[i]), with overflow checks.
    uint64_t extent = rb;
    for (int i = 1; i < 4; i++) {
      uint64_t term;
      if (__builtin_mul_overflow(uint64_t(t.ne[i] - 1), t.nb[i], &term) || __builtin_add_overflow(extent, term, &extent))
        fail(std::string(role) + " strides overflow");
    }
    uint64_t end;
    if (__builtin_add_overflow(extent, t.offset, &end) || end > buffer->size)
      fail(std::string(role) + " view (offset " + std::to_string(t.offset) + " + extent " + std::to_string(extent) +
           " bytes) exceeds its buffer of " + std::to_string(buffer->size) + " bytes");
    out.data = buffer->data + t.offset;
    return out;
  }

  void expect_dtype(const DevTensor& t, loom_dtype dtype, const char* role) const {
    if (t.dtype != dtype)
      unsupported(prefix + role + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
  }
  void expect_shape(const DevTensor& t, const int64_t* ne, const char* role) const {
    for (int i = 0; i < 4; i++)
      if (t.ne[i] != ne[i]) fail(std::string(role) + " has shape " + shape_str(t.ne) + ", expected " + shape_str(ne));
  }
  void expect_shape(const DevTensor& t, int64_t a, int64_t b, int64_t c, int64_t d, const char* role) const {
    const int64_t ne[4] = {a, b, c, d};
    expect_shape(t, ne, role);
  }
};

template <typename T>
const T* params_of(const loom_op& op) {
  return static_cast<const T*>(op.params);
}

}  // namespace

OpArgs resolve_op(const loom_op& op, bool need_buffers) {
  const char* name = op_name(op.type);
  if (name == nullptr) unsupported("op type " + std::to_string(op.type) + " is not implemented by the cuda backend");
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
      if (!is_weight_dtype(a.src[0].dtype)) unsupported(c.prefix + "table dtype " + dtype_name(a.src[0].dtype) + " is not implemented by the cuda backend");
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
      if (!is_weight_dtype(a.src[0].dtype)) unsupported(c.prefix + "weight dtype " + dtype_name(a.src[0].dtype) + " is not implemented by the cuda backend");
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
      for (const DevTensor* t : {&a.src[0], &a.src[1], &a.dst}) c.expect_dtype(*t, LOOM_DTYPE_F32, t == &a.dst ? "dst" : "src");
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
      for (const DevTensor* t : {&a.src[0], &a.src[1], &a.dst}) c.expect_dtype(*t, LOOM_DTYPE_F32, t == &a.dst ? "dst" : "src");
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
      for (const DevTensor* t : {&a.src[0], &a.dst})
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
      const DevTensor& k = a.src[0];
      c.expect_shape(k, k.ne[0], k.ne[1], k.ne[2], 1, "src0 (k)");
      c.expect_shape(a.src[1], k.ne, "src1 (v)");
      c.expect_shape(a.src[2], k.ne[2], 1, 1, 1, "src2 (slot_mapping)");
      for (int i = 3; i < 5; i++) {
        const char* role = i == 3 ? "src3 (k_cache)" : "src4 (v_cache)";
        if (!is_kv_dtype(a.src[i].dtype)) unsupported(c.prefix + role + " dtype " + dtype_name(a.src[i].dtype) + " is not a KV cache type (F32, F16, INT8_KV)");
        c.expect_shape(a.src[i], k.ne[0], k.ne[1], a.src[3].ne[2], 1, role);
      }
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
      const DevTensor& q = a.src[0];
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
      }
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
      if (q.ne[0] > kMaxHeadDim) unsupported(c.prefix + "head_dim " + std::to_string(q.ne[0]) + " is above the cuda backend's limit of " + std::to_string(kMaxHeadDim));
      break;
    }
    default: unsupported("op type " + std::to_string(op.type) + " is not implemented by the cuda backend");
  }
  if (op.type == LOOM_OP_UNARY || op.type == LOOM_OP_GLU) {
    const loom_activation act = a.params.activation;
    if (act != LOOM_ACTIVATION_SILU && act != LOOM_ACTIVATION_GELU_TANH && act != LOOM_ACTIVATION_GELU_ERF && act != LOOM_ACTIVATION_RELU)
      unsupported(c.prefix + "activation " + std::to_string(act) + " is not implemented");
  }
  return a;
}

}  // namespace loom::cuda
