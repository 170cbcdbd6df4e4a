// The mixture-of-experts FFN of one layer (qwen2moe, qwen3moe, qwen35moe, gpt-oss), appended to the op list by
// build_graph in place of the dense gate/up/down:
//   router = h·Wr (+ br);  ids, w = MOE_ROUTE(router)           // the n_used experts of each token
//   g, u = MOE_MATMUL(Wgate, h, ids) (+ bias), MOE_MATMUL(Wup, h, ids) (+ bias);  g = act(g) * u
//   out = MOE_SUM(MOE_MATMUL(Wdown, g, ids) (+ bias), w)
//   qwen2moe: out += sigmoid(h·g_s) (act(h·Wgate_s) * h·Wup_s)·Wdown_s, a shared expert
#include "model/model.h"

namespace loom {

void Model::build_moe_ffn(const LayerWeights& l, const loom_tensor& ffn_in, const loom_tensor& out, int64_t n) {
  const ModelInfo& m = info_;
  const int64_t dim = m.dim, n_used = m.n_expert_used, eff = m.expert_ff_dim;
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs,
                const void* params = nullptr) { ops_.push_back(make_op(type, dst, srcs, params)); };
  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
    return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2);
  };
  const loom_tensor ids = tensor_view(compute_, off_expert_ids_, LOOM_DTYPE_I32, n_used, n);
  const loom_tensor weights = f32(off_expert_w_, n_used, n), router = f32(off_router_, m.n_expert, n);
  const loom_tensor eg = f32(off_g_, eff, n_used, n), eu = f32(off_u_, eff, n_used, n);
  const loom_tensor shared_in = reshape(ffn_in, dim, 1, n), down = f32(off_expert_out_, dim, n_used, n);

  // The shared expert runs first: ffn_in may be `out`, which the expert sum overwrites.
  const bool shared = l.gate_shexp.buffer != nullptr;
  const int64_t sff = m.shared_expert_ff_dim;
  const loom_tensor shared_out = f32(off_shared_out_, dim, 1, n), shared_gate = f32(off_shared_gate_, 1, n);
  if (shared) {
    const loom_tensor sg = f32(off_shared_g_, sff, n), su = f32(off_shared_u_, sff, n);
    op(LOOM_OP_MATMUL, sg, {l.gate_shexp, ffn_in});
    op(LOOM_OP_MATMUL, su, {l.up_shexp, ffn_in});
    op(LOOM_OP_GLU, sg, {sg, su}, &glu_params_);
    op(LOOM_OP_MATMUL, reshape(shared_out, dim, n), {l.down_shexp, sg});
    op(LOOM_OP_MATMUL, shared_gate, {l.shexp_gate_inp, ffn_in});
    op(LOOM_OP_UNARY, shared_gate, {shared_gate}, &sigmoid_params_);
  }

  op(LOOM_OP_MATMUL, router, {l.ffn_router, ffn_in});
  if (l.ffn_router_b.buffer != nullptr) op(LOOM_OP_ADD, router, {router, l.ffn_router_b});
  op(LOOM_OP_MOE_ROUTE, weights, {router, ids}, &moe_route_);
  // gpt-oss adds a per-expert bias to each expert matmul (MOE_MATMUL's optional src3).
  auto experts = [&](const loom_tensor& dst, const loom_tensor& w, const loom_tensor& bias, const loom_tensor& in) {
    if (bias.buffer != nullptr) op(LOOM_OP_MOE_MATMUL, dst, {w, in, ids, bias});
    else op(LOOM_OP_MOE_MATMUL, dst, {w, in, ids});
  };
  experts(eg, l.gate_exps, l.gate_exps_b, shared_in);
  experts(eu, l.up_exps, l.up_exps_b, shared_in);
  op(LOOM_OP_GLU, eg, {eg, eu}, &glu_params_);
  experts(down, l.down_exps, l.down_exps_b, eg);
  op(LOOM_OP_MOE_SUM, out, {down, weights});

  if (shared) {
    // A one-slot sum is the per-token scaling: out += sigmoid gate * shared output.
    const loom_tensor gated = f32(off_shared_sum_, dim, n);
    op(LOOM_OP_MOE_SUM, gated, {shared_out, shared_gate});
    op(LOOM_OP_ADD, out, {out, gated});
  }
}

}  // namespace loom
