// Conformance cases for the mixture-of-experts ops (ABI 1.5): routing, the per-expert matmul and
// the weighted sum, each against the CPU reference. A backend that does not implement them answers
// UNSUPPORTED, and the cases report not-supported.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "backend_support.h"

namespace loom::conformance {

namespace {

using namespace backend;

std::vector<int32_t> ints(const HostTensor& t) {
  std::vector<int32_t> out(t.data.size() / 4);
  std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

// Runs one op on the plugin and on the reference; returns both sets of operands (srcs then dst).
std::pair<std::vector<HostTensor>, std::vector<HostTensor>> run_both(CaseContext& ctx, loom_op_type type,
                                                                     const std::vector<HostTensor>& operands, const void* params,
                                                                     const std::string& what) {
  std::vector<HostTensor> got = operands, want = operands;
  auto run = [&](Device& dev, std::vector<HostTensor>& t, const char* who) {
    std::vector<HostTensor*> srcs;
    for (size_t i = 0; i + 1 < t.size(); i++) srcs.push_back(&t[i]);
    const loom_status st = dev.run(type, srcs, &t.back(), params);
    require(st == LOOM_STATUS_OK, what + ": " + who + " run_ops failed (" + std::to_string(st) + "): " + dev.last_error());
  };
  run(*device_under_test(ctx), got, "");
  run(*reference_device(ctx), want, "reference");
  return {got, want};
}

// Each token's chosen experts (best first, the lower id first on a tie) and their weights, by the
// definitions in backend.h, written here independently of any backend.
std::pair<std::vector<int32_t>, std::vector<float>> naive_route(const std::vector<float>& logits, int64_t n_expert, int64_t n_tok,
                                                                const loom_moe_route_params& p) {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  for (int64_t t = 0; t < n_tok; t++) {
    const float* x = &logits[size_t(t * n_expert)];
    std::vector<double> score(x, x + n_expert);
    const double max = *std::max_element(score.begin(), score.end());
    if (p.gating == LOOM_MOE_GATING_SOFTMAX) {
      double sum = 0.0;
      for (double& s : score) sum += s = std::exp(s - max);
      for (double& s : score) s /= sum;
    } else if (p.gating == LOOM_MOE_GATING_SIGMOID) {
      for (double& s : score) s = 1.0 / (1.0 + std::exp(-s));
    }
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t l, int32_t r) { return score[size_t(l)] > score[size_t(r)]; });
    std::vector<double> w;
    for (uint32_t j = 0; j < p.n_used; j++) w.push_back(score[size_t(order[j])]);
    if (p.gating == LOOM_MOE_GATING_SOFTMAX_CHOSEN) {
      double sum = 0.0;
      const double best = w[0];
      for (double& v : w) sum += v = std::exp(v - best);
      for (double& v : w) v /= sum;
    }
    if (p.normalize) {
      double sum = 0.0;
      for (double v : w) sum += v;
      for (double& v : w) v /= std::max(sum, 6.103515625e-5);
    }
    for (uint32_t j = 0; j < p.n_used; j++) {
      ids.push_back(order[j]);
      weights.push_back(float(w[j] * (p.scale == 0.0f ? 1.0 : double(p.scale))));
    }
  }
  return {ids, weights};
}

Case route_case(const std::string& name, loom_moe_gating gating, bool normalize, float scale) {
  return {"backend.moe_route." + name, LOOM_PLUGIN_KIND_BACKEND, [=](CaseContext& ctx) {
            std::mt19937 rng(31 + uint32_t(gating));
            const int64_t n_expert = 12, n_used = 3, n_tok = 21;
            const loom_moe_route_params params{sizeof(loom_moe_route_params), uint32_t(n_used), gating, normalize ? 1u : 0u, scale};
            const std::vector<float> logits = random_floats(rng, size_t(n_expert * n_tok), -4.0f, 4.0f);
            HostTensor x = f32_tensor(logits, n_expert, n_tok), ids = zero_tensor(LOOM_DTYPE_I32, n_used, n_tok);
            HostTensor weights = zero_tensor(LOOM_DTYPE_F32, n_used, n_tok);
            auto dut = device_under_test(ctx);
            const loom_status st = dut->run(LOOM_OP_MOE_ROUTE, {&x, &ids}, &weights, &params);
            require(st == LOOM_STATUS_OK, "MOE_ROUTE " + name + " failed (" + std::to_string(st) + "): " + dut->last_error());
            const auto [want_ids, want_weights] = naive_route(logits, n_expert, n_tok, params);
            require(ints(ids) == want_ids, "MOE_ROUTE " + name + ": chosen experts differ from the definition");
            require_close(weights.floats(), want_weights, 1e-5, "MOE_ROUTE " + name + " weights");
          }};
}

// Expert ids for n_tok tokens: expert 0 popular, the last expert never chosen, no repeats per token.
HostTensor expert_ids(std::mt19937& rng, int64_t n_expert, int64_t n_used, int64_t n_tok) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < n_tok; t++) {
    std::vector<int32_t> pool;
    for (int32_t e = 0; e + 1 < n_expert; e++) pool.push_back(e);
    std::shuffle(pool.begin() + 1, pool.end(), rng);
    if (t % 3 == 0) std::swap(pool[0], pool[size_t(n_used)]);  // expert 0 in two of three tokens
    ids.insert(ids.end(), pool.begin(), pool.begin() + n_used);
  }
  return i32_tensor(ids, n_used, n_tok);
}

Case matmul_case(loom_dtype dtype, int64_t n_tok, bool shared_x, bool bias = false) {
  const std::string name = dtype_label(dtype) + ".tok" + std::to_string(n_tok) + (shared_x ? ".shared_x" : "") + (bias ? ".bias" : "");
  return {"backend.moe_matmul." + name, LOOM_PLUGIN_KIND_BACKEND, [=](CaseContext& ctx) {
            if (!device_under_test(ctx)->declares_weight(dtype)) not_supported("caps do not declare " + dtype_label(dtype) + " weights");
            std::mt19937 rng(555 + uint32_t(dtype) + uint32_t(n_tok));
            const bool k_quant = dtype == LOOM_DTYPE_Q4_K || dtype == LOOM_DTYPE_Q6_K || dtype == LOOM_DTYPE_Q5_K;
            const int64_t n_in = k_quant ? 256 : 96, n_out = 37, n_expert = 6, n_used = 2;
            HostTensor w = random_weights(rng, dtype, n_in, n_out * n_expert);
            w.ne[1] = n_out, w.ne[2] = n_expert;
            const int64_t x_slots = shared_x ? 1 : n_used;
            HostTensor x = f32_tensor(random_floats(rng, size_t(n_in * x_slots * n_tok)), n_in, x_slots, n_tok);
            const bool quantized = dtype != LOOM_DTYPE_F32 && dtype != LOOM_DTYPE_F16 && dtype != LOOM_DTYPE_BF16;
            std::vector<HostTensor> operands = {w, x, expert_ids(rng, n_expert, n_used, n_tok)};
            if (bias) operands.push_back(f32_tensor(random_floats(rng, size_t(n_out * n_expert)), n_out, n_expert));
            operands.push_back(zero_tensor(LOOM_DTYPE_F32, n_out, n_used, n_tok));
            const auto [got, want] = run_both(ctx, LOOM_OP_MOE_MATMUL, operands, nullptr, "MOE_MATMUL " + name);
            // As MATMUL: int8 activations cost ≲1% of max|ref| on quantized weights.
            require_close(got.back().floats(), want.back().floats(), quantized ? 3e-2 : 1e-4, "MOE_MATMUL " + name);
          }};
}

// A layer's gate and up in one run_ops call: MOE_MATMULs of one activation and routing, which a
// backend may run together, then a third that overwrites the first one's output. The result must be
// what running them in order gives.
Case matmul_chain_case() {
  return {"backend.moe_matmul.gate_up_chain", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
            auto dut = device_under_test(ctx);
            if (!dut->declares_weight(LOOM_DTYPE_Q8_0)) not_supported("caps do not declare Q8_0 weights");
            std::mt19937 rng(31);
            const int64_t n_in = 96, n_out = 37, n_expert = 6, n_used = 2, n_tok = 9;
            // tensors: 0 = x, 1 = ids, 2..4 = weights, 5 and 6 = outputs
            std::vector<HostTensor> tensors = {f32_tensor(random_floats(rng, size_t(n_in * n_tok)), n_in, 1, n_tok),
                                               expert_ids(rng, n_expert, n_used, n_tok)};
            for (int i = 0; i < 3; i++) {
              tensors.push_back(random_weights(rng, LOOM_DTYPE_Q8_0, n_in, n_out * n_expert));
              tensors.back().ne[1] = n_out, tensors.back().ne[2] = n_expert;
            }
            for (int i = 0; i < 2; i++) tensors.push_back(zero_tensor(LOOM_DTYPE_F32, n_out, n_used, n_tok));
            const std::vector<ChainOp> chain = {{LOOM_OP_MOE_MATMUL, {2, 0, 1}, 5}, {LOOM_OP_MOE_MATMUL, {3, 0, 1}, 6},
                                                {LOOM_OP_MOE_MATMUL, {4, 0, 1}, 5}};
            const loom_status st = dut->run_chain(tensors, chain);
            require(st == LOOM_STATUS_OK, "run_ops of three MOE_MATMULs failed (" + std::to_string(st) + "): " + dut->last_error());
            auto ref = reference_device(ctx);
            const int expected_from[] = {4, 3};  // outputs 5 and 6: the last writer of each
            for (int o = 0; o < 2; o++) {
              HostTensor w = tensors[size_t(expected_from[o])], x = tensors[0], ids = tensors[1];
              HostTensor want = zero_tensor(LOOM_DTYPE_F32, n_out, n_used, n_tok);
              require(ref->run(LOOM_OP_MOE_MATMUL, {&w, &x, &ids}, &want, nullptr) == LOOM_STATUS_OK, "reference run_ops failed: " + ref->last_error());
              require_close(tensors[size_t(5 + o)].floats(), want.floats(), 3e-2, "output " + std::to_string(o) + " of the chain");
            }
          }};
}

}  // namespace

std::vector<Case> backend_moe_cases() {
  std::vector<Case> out;
  out.push_back(route_case("softmax_normalized", LOOM_MOE_GATING_SOFTMAX, true, 0.0f));
  out.push_back(route_case("softmax", LOOM_MOE_GATING_SOFTMAX, false, 0.0f));
  out.push_back(route_case("sigmoid_scaled", LOOM_MOE_GATING_SIGMOID, true, 2.5f));
  out.push_back(route_case("softmax_chosen", LOOM_MOE_GATING_SOFTMAX_CHOSEN, false, 0.0f));
  for (loom_dtype dtype : {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_MXFP4,
                          LOOM_DTYPE_F8_E4M3_B32})
    for (int64_t n_tok : {1, 5, 40}) out.push_back(matmul_case(dtype, n_tok, n_tok != 5));
  for (int64_t n_tok : {1, 40}) out.push_back(matmul_case(LOOM_DTYPE_Q8_0, n_tok, false, true));  // gpt-oss's expert biases
  out.push_back(matmul_chain_case());
  out.push_back({"backend.moe_sum", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
                   std::mt19937 rng(8);
                   const int64_t ne0 = 70, n_used = 4, n_tok = 9;
                   const auto [got, want] = run_both(ctx, LOOM_OP_MOE_SUM,
                                                     {f32_tensor(random_floats(rng, size_t(ne0 * n_used * n_tok)), ne0, n_used, n_tok),
                                                      f32_tensor(random_floats(rng, size_t(n_used * n_tok), 0.0f, 1.0f), n_used, n_tok),
                                                      zero_tensor(LOOM_DTYPE_F32, ne0, n_tok)},
                                                     nullptr, "MOE_SUM");
                   require_close(got[2].floats(), want[2].floats(), 1e-5, "MOE_SUM");
                 }});
  out.push_back({"backend.moe_matmul.expert_id_out_of_range_is_an_error", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
                   auto dut = device_under_test(ctx);
                   std::mt19937 rng(9);
                   HostTensor w = random_weights(rng, LOOM_DTYPE_F32, 32, 8 * 4);
                   w.ne[1] = 8, w.ne[2] = 4;
                   HostTensor x = f32_tensor(random_floats(rng, 32 * 2), 32, 1, 2);
                   HostTensor ids = i32_tensor({0, 1, 2, 4}, 2, 2);  // 4 is not an expert of 4
                   HostTensor dst = zero_tensor(LOOM_DTYPE_F32, 8, 2, 2);
                   const loom_status st = dut->run(LOOM_OP_MOE_MATMUL, {&w, &x, &ids}, &dst, nullptr);
                   dut->api().stream_synchronize(dut->handle(), nullptr);
                   require(st != LOOM_STATUS_OK, "MOE_MATMUL with expert id 4 of 4 experts returned OK");
                 }});
  return out;
}

}  // namespace loom::conformance
