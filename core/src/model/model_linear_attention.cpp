// The token mixer of a Gated DeltaNet layer (qwen35, llama.cpp's qwen35.cpp), appended to the op
// list by build_graph in place of attention:
//   mixed = h·Win [conv_dim]; z = h·Wgate [value_dim]
//   beta = sigmoid(h·Wbeta); g = softplus(h·Walpha + dt_bias) * a        // [n_v_heads] per token
//   c = silu(SSM_CONV(mixed, kernel, the sequence's conv state))          // q | k | v per token
//   o = GATED_DELTA_NET(q, k (L2-normalised), v, g, beta, the sequence's delta state)
//   out = (rms_norm(o per head) * norm · silu(z))·Wout
// The states live in the KvCache, one slot per sequence (staged as [first row, rows, slot, fresh]).
#include "model/model.h"

namespace loom {

void Model::build_linear_attention(int32_t il, const loom_tensor& in, const loom_tensor& out, int64_t n, int64_t n_seqs,
                                   const KvCache& kv) {
  const ModelInfo& m = info_;
  const LayerWeights& l = layers_[static_cast<size_t>(il)];
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs,
                const void* params = nullptr) { ops_.push_back(make_op(type, dst, srcs, params)); };
  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
    return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2);
  };
  const int64_t conv_dim = m.ssm_conv_dim(), key_dim = m.ssm_key_dim(), value_dim = m.ssm_value_dim();
  const int64_t n_v = m.ssm_n_v_heads, d_v = m.ssm_d_v;
  const loom_tensor mixed = f32(off_ssm_in_, conv_dim, n), conv = f32(off_ssm_conv_, conv_dim, n);
  const loom_tensor z = f32(off_ssm_z_, value_dim, n), o = f32(off_ssm_out_, value_dim, n);
  const loom_tensor g = f32(off_ssm_g_, n_v, n), beta = f32(off_ssm_beta_, n_v, n);
  const loom_tensor seqs = tensor_view(inputs_, off_state_seqs_, LOOM_DTYPE_I32, 4, n_seqs);

  op(LOOM_OP_MATMUL, mixed, {l.ssm_in, in});
  op(LOOM_OP_MATMUL, z, {l.ssm_gate, in});
  op(LOOM_OP_MATMUL, beta, {l.ssm_beta, in});
  op(LOOM_OP_UNARY, beta, {beta}, &sigmoid_params_);
  op(LOOM_OP_MATMUL, g, {l.ssm_alpha, in});
  op(LOOM_OP_ADD, g, {g, l.ssm_dt_bias});
  op(LOOM_OP_UNARY, g, {g}, &softplus_params_);
  op(LOOM_OP_MUL, g, {g, l.ssm_a});
  op(LOOM_OP_SSM_CONV, conv, {mixed, l.ssm_conv, kv.conv_state(il), seqs});
  op(LOOM_OP_UNARY, conv, {conv}, &silu_params_);

  // Each token's row of `conv` holds q (key_dim), k (key_dim), then v (value_dim): q and k are one
  // 4-D view whose dim 2 steps from q to k.
  loom_tensor qk = tensor_view(compute_, off_ssm_conv_, LOOM_DTYPE_F32, m.ssm_d_k, m.ssm_n_k_heads, 2, n);
  qk.nb[2] = uint64_t(key_dim) * 4;
  qk.nb[3] = uint64_t(conv_dim) * 4;
  loom_tensor v = tensor_view(compute_, off_ssm_conv_ + uint64_t(2 * key_dim) * 4, LOOM_DTYPE_F32, d_v, n_v, n);
  v.nb[2] = uint64_t(conv_dim) * 4;
  const loom_tensor o3 = f32(off_ssm_out_, d_v, n_v, n);
  op(LOOM_OP_GATED_DELTA_NET, o3, {qk, v, g, beta, kv.delta_state(il), seqs}, &delta_net_params_);

  op(LOOM_OP_RMS_NORM, o3, {o3, l.ssm_norm}, &norm_params_);
  op(LOOM_OP_GLU, o, {z, o}, &silu_params_);
  op(LOOM_OP_MATMUL, out, {l.ssm_out, o});
}

}  // namespace loom
