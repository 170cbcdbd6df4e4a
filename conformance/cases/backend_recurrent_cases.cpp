// Conformance cases for the recurrent ops (ABI 1.6): the short causal convolution and the gated
// delta rule over per-sequence state slots, each against its definition in backend.h written out
// here in double precision (not against another backend), plus SOFTPLUS. Batches mix a fresh
// sequence with continuing ones in a shuffled slot order, so a backend that reads the wrong slot,
// ignores the fresh flag or leaks state between sequences fails. A backend without the ops answers
// UNSUPPORTED and the cases report not-supported.
#include <cmath>
#include <cstring>
#include <random>

#include "backend_support.h"

namespace loom::conformance {

namespace {

using namespace backend;

// Three sequences: rows [0, 5) in slot 2 (fresh), [5, 6) in slot 0, [6, 15) in slot 3, of 4 slots.
constexpr int64_t kTokens = 15, kSlots = 4;
const std::vector<int32_t> kSeqs = {0, 5, 2, 1, 5, 1, 0, 0, 6, 9, 3, 0};

void run_or_fail(Device& dut, loom_op_type type, std::vector<HostTensor*> srcs, HostTensor* dst, const void* params,
                 const std::string& what) {
  const loom_status st = dut.run(type, std::move(srcs), dst, params);
  require(st == LOOM_STATUS_OK, what + " failed (" + std::to_string(st) + "): " + dut.last_error());
}

void case_ssm_conv(CaseContext& ctx) {
  std::mt19937 rng(61);
  const int64_t channels = 40, d_conv = 4;
  const std::vector<float> xs = random_floats(rng, size_t(channels * kTokens)), w = random_floats(rng, size_t(d_conv * channels));
  const std::vector<float> states0 = random_floats(rng, size_t((d_conv - 1) * channels * kSlots));
  HostTensor x = f32_tensor(xs, channels, kTokens), weight = f32_tensor(w, d_conv, channels);
  HostTensor states = f32_tensor(states0, d_conv - 1, channels, kSlots), seqs = i32_tensor(kSeqs, 4, 3);
  HostTensor dst = zero_tensor(LOOM_DTYPE_F32, channels, kTokens);
  auto dut = device_under_test(ctx);
  run_or_fail(*dut, LOOM_OP_SSM_CONV, {&x, &weight, &states, &seqs}, &dst, nullptr, "SSM_CONV");

  std::vector<float> want_dst(size_t(channels * kTokens)), want_states = states0;
  for (size_t s = 0; s < 3; ++s) {
    const int64_t first = kSeqs[4 * s], n = kSeqs[4 * s + 1], slot = kSeqs[4 * s + 2];
    const bool fresh = kSeqs[4 * s + 3] != 0;
    for (int64_t c = 0; c < channels; ++c) {
      std::vector<double> window;  // the slot's d_conv - 1 columns, then the sequence's inputs
      for (int64_t i = 0; i < d_conv - 1; ++i) window.push_back(fresh ? 0.0 : states0[size_t((slot * channels + c) * (d_conv - 1) + i)]);
      for (int64_t t = 0; t < n; ++t) window.push_back(xs[size_t((first + t) * channels + c)]);
      for (int64_t t = 0; t < n; ++t) {
        double sum = 0.0;
        for (int64_t i = 0; i < d_conv; ++i) sum += w[size_t(c * d_conv + i)] * window[size_t(t + i)];
        want_dst[size_t((first + t) * channels + c)] = float(sum);
      }
      for (int64_t i = 0; i < d_conv - 1; ++i) {
        want_states[size_t((slot * channels + c) * (d_conv - 1) + i)] = float(window[window.size() - size_t(d_conv - 1) + size_t(i)]);
      }
    }
  }
  require_close(dst.floats(), want_dst, 1e-5, "SSM_CONV output");
  require_close(states.floats(), want_states, 1e-6, "SSM_CONV states (slot 1, held by no sequence, must be untouched)");
}

struct DeltaNetShape {
  int64_t d = 16, n_k_heads = 2, n_v_heads = 4;
  bool normalize = true;
  float q_scale = 0.0f;
  bool grouped = false;  // ABI 1.7: v head h reads key head h / (n_v / n_k) instead of h % n_k
  int64_t tokens = kTokens;
  std::vector<int32_t> seqs = kSeqs;  // {first, n, slot, fresh} per sequence, slots of kSlots
};

void case_gated_delta_net(CaseContext& ctx, const DeltaNetShape& sh, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t d = sh.d, hk = sh.n_k_heads, hv = sh.n_v_heads;
  const std::vector<float> qk0 = random_floats(rng, size_t(d * hk * 2 * sh.tokens)), v0 = random_floats(rng, size_t(d * hv * sh.tokens));
  const std::vector<float> g0 = random_floats(rng, size_t(hv * sh.tokens), -1.0f, 0.0f), beta0 = random_floats(rng, size_t(hv * sh.tokens), 0.0f, 1.0f);
  const std::vector<float> states0 = random_floats(rng, size_t(d * d * hv * kSlots), -0.5f, 0.5f);
  HostTensor qk = f32_tensor(qk0, d, hk, 2, sh.tokens), v = f32_tensor(v0, d, hv, sh.tokens);
  HostTensor g = f32_tensor(g0, hv, sh.tokens), beta = f32_tensor(beta0, hv, sh.tokens);
  HostTensor states = f32_tensor(states0, d, d, hv, kSlots), seqs = i32_tensor(sh.seqs, 4, int64_t(sh.seqs.size() / 4));
  HostTensor dst = zero_tensor(LOOM_DTYPE_F32, d, hv, sh.tokens);
  const float eps = 1e-6f;
  const loom_delta_net_params params{sizeof(loom_delta_net_params), sh.q_scale, sh.normalize ? 1u : 0u, eps, sh.grouped ? 1u : 0u};
  auto dut = device_under_test(ctx);
  run_or_fail(*dut, LOOM_OP_GATED_DELTA_NET, {&qk, &v, &g, &beta, &states, &seqs}, &dst, &params, "GATED_DELTA_NET");

  const double scale = sh.q_scale == 0.0f ? 1.0 / std::sqrt(double(d)) : double(sh.q_scale);
  std::vector<float> want_dst(size_t(d * hv * sh.tokens)), want_states = states0;
  auto vec = [&](int64_t which, int64_t head, int64_t t) {  // q (0) or k (1) of a head, normalised as the op does
    std::vector<double> out(static_cast<size_t>(d), 0.0);
    double sum = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      out[size_t(i)] = qk0[size_t(((t * 2 + which) * hk + head) * d + i)];
      sum += out[size_t(i)] * out[size_t(i)];
    }
    if (sh.normalize)
      for (double& x : out) x /= std::sqrt(sum + eps);
    return out;
  };
  for (size_t s = 0; s < sh.seqs.size() / 4; ++s) {
    const int64_t first = sh.seqs[4 * s], n = sh.seqs[4 * s + 1], slot = sh.seqs[4 * s + 2];
    for (int64_t h = 0; h < hv; ++h) {
      // S[i][j] = state[((slot * hv + h) * d + j) * d + i]: key dim i, value dim j.
      std::vector<double> S(size_t(d * d), 0.0);
      if (sh.seqs[4 * s + 3] == 0)
        for (int64_t k = 0; k < d * d; ++k) S[size_t(k)] = states0[size_t((slot * hv + h) * d * d + k)];
      for (int64_t t = first; t < first + n; ++t) {
        const int64_t key_head = sh.grouped ? h / (hv / hk) : h % hk;
        const std::vector<double> q = vec(0, key_head, t), k = vec(1, key_head, t);
        const double decay = std::exp(double(g0[size_t(t * hv + h)])), b = beta0[size_t(t * hv + h)];
        for (double& x : S) x *= decay;
        for (int64_t j = 0; j < d; ++j) {
          double kv = 0.0;
          for (int64_t i = 0; i < d; ++i) kv += S[size_t(j * d + i)] * k[size_t(i)];
          const double delta = b * (double(v0[size_t((t * hv + h) * d + j)]) - kv);
          for (int64_t i = 0; i < d; ++i) S[size_t(j * d + i)] += k[size_t(i)] * delta;
        }
        for (int64_t j = 0; j < d; ++j) {
          double o = 0.0;
          for (int64_t i = 0; i < d; ++i) o += S[size_t(j * d + i)] * q[size_t(i)];
          want_dst[size_t((t * hv + h) * d + j)] = float(o * scale);
        }
      }
      for (int64_t k = 0; k < d * d; ++k) want_states[size_t((slot * hv + h) * d * d + k)] = float(S[size_t(k)]);
    }
  }
  require_close(dst.floats(), want_dst, 1e-4, "GATED_DELTA_NET output");
  require_close(states.floats(), want_states, 1e-4, "GATED_DELTA_NET states (slot 1 must be untouched)");
}

void case_bad_slot(CaseContext& ctx, const std::vector<int32_t>& seqs_table, const std::string& what) {
  auto dut = device_under_test(ctx);
  const int64_t channels = 8, d_conv = 3;
  HostTensor x = zero_tensor(LOOM_DTYPE_F32, channels, 4), w = zero_tensor(LOOM_DTYPE_F32, d_conv, channels);
  HostTensor states = zero_tensor(LOOM_DTYPE_F32, d_conv - 1, channels, 2), seqs = i32_tensor(seqs_table, 4, int64_t(seqs_table.size() / 4));
  HostTensor dst = zero_tensor(LOOM_DTYPE_F32, channels, 4);
  const loom_status st = dut->run(LOOM_OP_SSM_CONV, {&x, &w, &states, &seqs}, &dst, nullptr);
  require(st == LOOM_STATUS_INVALID_ARGUMENT, "SSM_CONV with " + what + " must fail with INVALID_ARGUMENT, got " + std::to_string(st));
}

}  // namespace

std::vector<Case> backend_recurrent_cases() {
  const auto backend_case = [](std::string name, std::function<void(CaseContext&)> run) {
    return Case{std::move(name), LOOM_PLUGIN_KIND_BACKEND, std::move(run)};
  };
  return {
      backend_case("backend.ssm_conv", case_ssm_conv),
      backend_case("backend.gated_delta_net.d16_gqa", [](CaseContext& ctx) { case_gated_delta_net(ctx, {}, 71); }),
      backend_case("backend.gated_delta_net.d32_unnormalized_scaled",
                   [](CaseContext& ctx) { case_gated_delta_net(ctx, {32, 4, 4, false, 0.5f}, 72); }),
      backend_case("backend.gated_delta_net.d16_grouped_heads",
                   [](CaseContext& ctx) { case_gated_delta_net(ctx, {16, 2, 6, true, 0.0f, true}, 73); }),
      // Prompts long enough for a backend to prefill in chunks: 150 tokens (two chunks of 64 and a
      // part) from a kept state, 70 fresh, 1 decoded beside them; head size 128 as in Qwen 3.5.
      backend_case("backend.gated_delta_net.d128_long_prompts",
                   [](CaseContext& ctx) {
                     DeltaNetShape sh{128, 2, 4, true, 0.0f, false, 221, {0, 150, 3, 0, 150, 70, 1, 1, 220, 1, 0, 0}};
                     case_gated_delta_net(ctx, sh, 74);
                   }),
      backend_case("backend.ssm_conv.slot_out_of_range_is_an_error",
                   [](CaseContext& ctx) { case_bad_slot(ctx, {0, 4, 2, 1}, "state slot 2 of 2"); }),
      backend_case("backend.ssm_conv.shared_slot_is_an_error",
                   [](CaseContext& ctx) { case_bad_slot(ctx, {0, 2, 1, 1, 2, 2, 1, 1}, "two sequences on slot 1"); }),
      backend_case("backend.unary.softplus",
                   [](CaseContext& ctx) {
                     std::vector<float> xs = {-30.0f, -5.0f, -1.0f, 0.0f, 0.5f, 3.0f, 19.9f, 20.5f, 60.0f};
                     HostTensor x = f32_tensor(xs, int64_t(xs.size())), dst = zero_tensor(LOOM_DTYPE_F32, int64_t(xs.size()));
                     const loom_glu_params params{sizeof(loom_glu_params), LOOM_ACTIVATION_SOFTPLUS};
                     auto dut = device_under_test(ctx);
                     run_or_fail(*dut, LOOM_OP_UNARY, {&x}, &dst, &params, "UNARY SOFTPLUS");
                     std::vector<float> want;
                     for (float v : xs) want.push_back(v > 20.0f ? v : float(std::log1p(std::exp(double(v)))));
                     require_close(dst.floats(), want, 1e-6, "UNARY SOFTPLUS");
                   }),
  };
}

}  // namespace loom::conformance
