// Conformance cases for the backend kind: every op against the CPU reference backend, through the
// plugin's loom_backend_i table, with guard regions around every operand.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend_support.h"

namespace loom::conformance {

std::vector<Case> backend_attention_cases();  // backend_attention_cases.cpp
std::vector<Case> backend_moe_cases();        // backend_moe_cases.cpp
std::vector<Case> backend_recurrent_cases();  // backend_recurrent_cases.cpp
std::vector<Case> backend_encoder_cases();    // backend_encoder_cases.cpp
std::vector<Case> backend_lora_cases();       // backend_lora_cases.cpp
std::vector<Case> backend_invariance_cases();  // backend_invariance_cases.cpp

namespace {

using namespace backend;

// Runs the op on the plugin under test and on the reference and compares the dst tensors.
void compare_with_reference(CaseContext& ctx, loom_op_type type, const std::vector<HostTensor>& srcs, HostTensor dst,
                            const void* params, double tolerance, const std::string& what) {
  auto dut = device_under_test(ctx);
  auto ref = reference_device(ctx);
  std::vector<HostTensor> s_dut = srcs, s_ref = srcs;
  HostTensor d_dut = dst, d_ref = dst;
  auto ptrs = [](std::vector<HostTensor>& v) {
    std::vector<HostTensor*> out;
    for (auto& t : v) out.push_back(&t);
    return out;
  };
  loom_status st = dut->run(type, ptrs(s_dut), &d_dut, params);
  require(st == LOOM_STATUS_OK, what + ": run_ops failed (" + std::to_string(st) + "): " + dut->last_error());
  st = ref->run(type, ptrs(s_ref), &d_ref, params);
  require(st == LOOM_STATUS_OK, what + ": reference run_ops failed: " + ref->last_error());
  if (d_dut.dtype == LOOM_DTYPE_F32) {
    require_close(d_dut.floats(), d_ref.floats(), tolerance, what);
  } else {  // F16 / BF16 outputs of COPY: conversions must round identically
    require(d_dut.data == d_ref.data, what + ": converted bits differ from the reference");
  }
}

const loom_dtype kWeightTypes[] = {LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16,  LOOM_DTYPE_Q4_0,   LOOM_DTYPE_Q5_0,
                                   LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K,  LOOM_DTYPE_Q5_K,   LOOM_DTYPE_Q4_1,
                                   LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K,  LOOM_DTYPE_IQ4_NL, LOOM_DTYPE_IQ4_XS,
                                   LOOM_DTYPE_MXFP4, LOOM_DTYPE_F8_E4M3_B32};

// n_in per type: not a multiple of 64 where the block size allows (tails, odd block counts).
int64_t odd_n_in(loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_Q4_0:
    case LOOM_DTYPE_Q4_1:
    case LOOM_DTYPE_Q5_0:
    case LOOM_DTYPE_Q5_1:
    case LOOM_DTYPE_IQ4_NL:
    case LOOM_DTYPE_MXFP4:
    case LOOM_DTYPE_F8_E4M3_B32:
    case LOOM_DTYPE_Q8_0: return 96 + 32 * 4;  // 7 blocks
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q5_K:
    case LOOM_DTYPE_IQ4_XS:
    case LOOM_DTYPE_Q6_K: return 768;  // 3 super-blocks
    default: return 100;                // not a multiple of 8: exercises SIMD tails
  }
}

void check_declared_weight(const Device& dev, loom_dtype dtype) {
  if (!dev.declares_weight(dtype)) not_supported("caps do not declare " + dtype_label(dtype) + " weights");
}

Case matmul_case(loom_dtype dtype, int64_t n_tok, int64_t rows_in = 0, int64_t n_out = 37) {
  const std::string shape = rows_in > 0 ? "_" + std::to_string(rows_in) + "x" + std::to_string(n_out) : "";
  return {"backend.matmul." + dtype_label(dtype) + ".tok" + std::to_string(n_tok) + shape, LOOM_PLUGIN_KIND_BACKEND, [=](CaseContext& ctx) {
            check_declared_weight(*device_under_test(ctx), dtype);
            std::mt19937 rng(1234 + uint32_t(dtype) * 7 + uint32_t(n_tok));
            const int64_t n_in = rows_in > 0 ? rows_in : odd_n_in(dtype);
            HostTensor w = random_weights(rng, dtype, n_in, n_out);
            HostTensor x = f32_tensor(random_floats(rng, size_t(n_in * n_tok)), n_in, n_tok);
            // Quantized weights: the backend may quantize activations to int8 blocks (≈1/254 relative
            // error per element); over random-sign sums that is ≲1% of max|ref|, while a wrong scale,
            // nibble order or offset gives O(1) errors. Float weights, and FP8 ones (their values are floats
            // and meet float activations): only summation order differs.
            const bool quantized = dtype != LOOM_DTYPE_F32 && dtype != LOOM_DTYPE_F16 && dtype != LOOM_DTYPE_BF16 &&
                                   dtype != LOOM_DTYPE_F8_E4M3_B32;
            compare_with_reference(ctx, LOOM_OP_MATMUL, {w, x}, zero_tensor(LOOM_DTYPE_F32, n_out, n_tok), nullptr,
                                   quantized ? 3e-2 : 1e-4, "MATMUL " + dtype_label(dtype));
          }};
}

// A token's result must not depend on the batch it runs in: the engine promises that a sequence
// decodes the same alone or beside fifteen others, so a backend may pick other kernels for batches
// but must quantize each token the same way. Only float summation order may differ. (The reference
// comparison's 3e-2 bound, sized for int8 activations, would let a batched kernel's wrong offset or
// rounding through: those give ~1% errors.)
void require_batch_invariant(Device& dut, HostTensor& w, std::mt19937& rng, int64_t n_tok) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  const std::vector<float> values = random_floats(rng, size_t(n_in * n_tok));
  HostTensor x = f32_tensor(values, n_in, n_tok), batched = zero_tensor(LOOM_DTYPE_F32, n_out, n_tok);
  loom_status st = dut.run(LOOM_OP_MATMUL, {&w, &x}, &batched, nullptr);
  require(st == LOOM_STATUS_OK, "batched MATMUL failed (" + std::to_string(st) + "): " + dut.last_error());
  const std::vector<float> all = batched.floats();
  for (int64_t t = 0; t < n_tok; t++) {
    HostTensor one = f32_tensor(std::vector<float>(values.begin() + t * n_in, values.begin() + (t + 1) * n_in), n_in, 1);
    HostTensor alone = zero_tensor(LOOM_DTYPE_F32, n_out, 1);
    st = dut.run(LOOM_OP_MATMUL, {&w, &one}, &alone, nullptr);
    require(st == LOOM_STATUS_OK, "one-token MATMUL failed (" + std::to_string(st) + "): " + dut.last_error());
    require_close(std::vector<float>(all.begin() + t * n_out, all.begin() + (t + 1) * n_out), alone.floats(), 1e-4,
                  "MATMUL " + dtype_label(w.dtype) + " token " + std::to_string(t) + " of " + std::to_string(n_tok) +
                      " against the same token alone");
  }
}

Case matmul_batch_invariance_case(loom_dtype dtype) {
  return {"backend.matmul." + dtype_label(dtype) + ".batch_invariant", LOOM_PLUGIN_KIND_BACKEND, [=](CaseContext& ctx) {
            auto dut = device_under_test(ctx);
            check_declared_weight(*dut, dtype);
            std::mt19937 rng(4321 + uint32_t(dtype));
            HostTensor w = random_weights(rng, dtype, odd_n_in(dtype), 37);
            // A few tokens, many, and a few past a multiple of 16: a backend may pick other kernels
            // for each, and for a batch's last tokens.
            for (const int64_t n_tok : {3, 5, 19, 40}) require_batch_invariant(*dut, w, rng, n_tok);
          }};
}

// Several matmuls of one activation row in one run_ops call, as a transformer layer issues q, k, v
// and gate, up: a backend may run them together, but the result must be what running them in order
// gives. Mixed weight types share the row, and the last matmul overwrites an earlier one's output,
// so a backend that merges them must still leave the later result.
Case matmul_chain_case() {
  return {"backend.matmul.shared_activation_chain", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
            auto dut = device_under_test(ctx);
            // Four weight types, the first four of these the backend declares (repeating if fewer).
            std::vector<loom_dtype> declared;
            for (loom_dtype d : {LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_Q4_0, LOOM_DTYPE_F16, LOOM_DTYPE_F32})
              if (dut->declares_weight(d)) declared.push_back(d);
            if (declared.empty()) not_supported("caps declare none of the weight types this case uses");
            loom_dtype types[4];
            for (size_t i = 0; i < 4; i++) types[i] = declared[i % declared.size()];
            std::mt19937 rng(77);
            const int64_t n_in = 512, n_out[] = {37, 64, 40, 64};
            // tensors: 0 = x, 1..4 = weights, 5..7 = outputs (the Q6_K matmul writes output 6 again)
            std::vector<HostTensor> tensors = {f32_tensor(random_floats(rng, size_t(n_in)), n_in)};
            for (int i = 0; i < 4; i++) tensors.push_back(random_weights(rng, types[i], n_in, n_out[i]));
            for (int64_t n : {n_out[0], n_out[1], n_out[2]}) tensors.push_back(zero_tensor(LOOM_DTYPE_F32, n, 1));
            const std::vector<ChainOp> chain = {{LOOM_OP_MATMUL, {1, 0}, 5}, {LOOM_OP_MATMUL, {2, 0}, 6},
                                                {LOOM_OP_MATMUL, {3, 0}, 7}, {LOOM_OP_MATMUL, {4, 0}, 6}};
            const loom_status st = dut->run_chain(tensors, chain);
            require(st == LOOM_STATUS_OK, "run_ops of four matmuls failed (" + std::to_string(st) + "): " + dut->last_error());
            // Each expected output from the reference, one op per call.
            auto ref = reference_device(ctx);
            const int expected_from[] = {1, 4, 3};  // outputs 5, 6, 7: the last writer of each
            for (int o = 0; o < 3; o++) {
              HostTensor w = tensors[size_t(expected_from[o])], x = tensors[0];
              HostTensor want = zero_tensor(LOOM_DTYPE_F32, w.ne[1], 1);
              require(ref->run(LOOM_OP_MATMUL, {&w, &x}, &want, nullptr) == LOOM_STATUS_OK, "reference run_ops failed: " + ref->last_error());
              require_close(tensors[size_t(5 + o)].floats(), want.floats(), 3e-2, "output " + std::to_string(o) + " of the chain");
            }
          }};
}

Case get_rows_case(loom_dtype dtype) {
  return {"backend.get_rows." + dtype_label(dtype), LOOM_PLUGIN_KIND_BACKEND, [=](CaseContext& ctx) {
            check_declared_weight(*device_under_test(ctx), dtype);
            std::mt19937 rng(99 + uint32_t(dtype));
            const int64_t n_in = odd_n_in(dtype), n_rows = 11;
            HostTensor table = random_weights(rng, dtype, n_in, n_rows);
            HostTensor ids = i32_tensor({3, 0, 10, 3, 7}, 5);
            // Dequantization is exact arithmetic on the block fields: only float rounding may differ.
            compare_with_reference(ctx, LOOM_OP_GET_ROWS, {table, ids}, zero_tensor(LOOM_DTYPE_F32, n_in, 5), nullptr, 1e-6,
                                   "GET_ROWS " + dtype_label(dtype));
          }};
}

// Element-wise and row-wise F32 ops: float math, results agree to a few ulps (1e-5 normalised).
constexpr double kRowOpTolerance = 1e-5;

std::vector<Case> row_op_cases() {
  std::vector<Case> out;
  auto add = [&](std::string name, std::function<void(CaseContext&, std::mt19937&)> body) {
    out.push_back({"backend." + name, LOOM_PLUGIN_KIND_BACKEND, [body](CaseContext& ctx) {
                     std::mt19937 rng(4242);
                     body(ctx, rng);
                   }});
  };
  for (int64_t n_rows : {1, 9}) {
    const std::string sfx = ".rows" + std::to_string(n_rows);
    add("add" + sfx, [n_rows](CaseContext& ctx, std::mt19937& rng) {
      const int64_t n = 77;
      compare_with_reference(ctx, LOOM_OP_ADD, {f32_tensor(random_floats(rng, size_t(n * n_rows)), n, n_rows), f32_tensor(random_floats(rng, size_t(n * n_rows)), n, n_rows)},
                             zero_tensor(LOOM_DTYPE_F32, n, n_rows), nullptr, kRowOpTolerance, "ADD");
    });
    add("mul_broadcast" + sfx, [n_rows](CaseContext& ctx, std::mt19937& rng) {
      const int64_t n = 77;
      compare_with_reference(ctx, LOOM_OP_MUL, {f32_tensor(random_floats(rng, size_t(n * n_rows)), n, n_rows), f32_tensor(random_floats(rng, size_t(n)), n)},
                             zero_tensor(LOOM_DTYPE_F32, n, n_rows), nullptr, kRowOpTolerance, "MUL broadcast");
    });
    add("scale" + sfx, [n_rows](CaseContext& ctx, std::mt19937& rng) {
      const loom_scale_params p{sizeof(loom_scale_params), -0.37f};
      compare_with_reference(ctx, LOOM_OP_SCALE, {f32_tensor(random_floats(rng, size_t(50 * n_rows)), 50, n_rows)},
                             zero_tensor(LOOM_DTYPE_F32, 50, n_rows), &p, kRowOpTolerance, "SCALE");
    });
    add("rms_norm" + sfx, [n_rows](CaseContext& ctx, std::mt19937& rng) {
      const loom_norm_params p{sizeof(loom_norm_params), 1e-5f};
      const int64_t n = 1000;
      HostTensor x = f32_tensor(random_floats(rng, size_t(n * n_rows), -3.0f, 3.0f), n, n_rows);
      compare_with_reference(ctx, LOOM_OP_RMS_NORM, {x, f32_tensor(random_floats(rng, size_t(n)), n)},
                             zero_tensor(LOOM_DTYPE_F32, n, n_rows), &p, kRowOpTolerance, "RMS_NORM");
      HostTensor no_weight = zero_tensor(LOOM_DTYPE_F32, n);
      no_weight.absent = true;
      compare_with_reference(ctx, LOOM_OP_RMS_NORM, {x, no_weight}, zero_tensor(LOOM_DTYPE_F32, n, n_rows), &p,
                             kRowOpTolerance, "RMS_NORM without weight");
    });
    add("softmax" + sfx, [n_rows](CaseContext& ctx, std::mt19937& rng) {
      compare_with_reference(ctx, LOOM_OP_SOFTMAX, {f32_tensor(random_floats(rng, size_t(333 * n_rows), -20.0f, 20.0f), 333, n_rows)},
                             zero_tensor(LOOM_DTYPE_F32, 333, n_rows), nullptr, kRowOpTolerance, "SOFTMAX");
    });
  }
  // gpt-oss's gated unit (ABI 1.5), against its formula written here; inputs cross both clamps (±7).
  add("glu.swiglu_oai", [](CaseContext& ctx, std::mt19937& rng) {
    const loom_glu_params p{sizeof(loom_glu_params), LOOM_ACTIVATION_SWIGLU_OAI};
    HostTensor g = f32_tensor(random_floats(rng, 300, -10, 10), 100, 3), u = f32_tensor(random_floats(rng, 300, -10, 10), 100, 3);
    HostTensor result = zero_tensor(LOOM_DTYPE_F32, 100, 3);
    auto dev = device_under_test(ctx);
    const loom_status st = dev->run(LOOM_OP_GLU, {&g, &u}, &result, &p);
    require(st == LOOM_STATUS_OK, "GLU SWIGLU_OAI failed: " + dev->last_error());
    std::vector<float> want;
    for (size_t i = 0; i < 300; i++) {
      const double x = std::min(double(g.floats()[i]), 7.0), y = std::clamp(double(u.floats()[i]), -7.0, 7.0);
      want.push_back(float(x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0)));
    }
    require_close(result.floats(), want, kRowOpTolerance, "GLU SWIGLU_OAI");
  });
  // qwen2moe's shared-expert gate (ABI 1.5), against the formula.
  add("unary.sigmoid", [](CaseContext& ctx, std::mt19937& rng) {
    const loom_glu_params p{sizeof(loom_glu_params), LOOM_ACTIVATION_SIGMOID};
    HostTensor x = f32_tensor(random_floats(rng, 300, -20, 20), 100, 3), result = zero_tensor(LOOM_DTYPE_F32, 100, 3);
    auto dev = device_under_test(ctx);
    const loom_status st = dev->run(LOOM_OP_UNARY, {&x}, &result, &p);
    require(st == LOOM_STATUS_OK, "UNARY SIGMOID failed: " + dev->last_error());
    std::vector<float> want;
    for (float v : x.floats()) want.push_back(float(1.0 / (1.0 + std::exp(-double(v)))));
    require_close(result.floats(), want, kRowOpTolerance, "UNARY SIGMOID");
  });
  // CLIP's quick GELU (ABI 1.10, LLaVA-style vision encoders), against the formula.
  add("unary.gelu_quick", [](CaseContext& ctx, std::mt19937& rng) {
    const loom_glu_params p{sizeof(loom_glu_params), LOOM_ACTIVATION_GELU_QUICK};
    HostTensor x = f32_tensor(random_floats(rng, 300, -20, 20), 100, 3), result = zero_tensor(LOOM_DTYPE_F32, 100, 3);
    auto dev = device_under_test(ctx);
    const loom_status st = dev->run(LOOM_OP_UNARY, {&x}, &result, &p);
    require(st == LOOM_STATUS_OK, "UNARY GELU_QUICK failed: " + dev->last_error());
    std::vector<float> want;
    for (float v : x.floats()) want.push_back(float(double(v) / (1.0 + std::exp(-1.702 * double(v)))));
    require_close(result.floats(), want, kRowOpTolerance, "UNARY GELU_QUICK");
  });
  for (loom_activation act : {LOOM_ACTIVATION_SILU, LOOM_ACTIVATION_GELU_TANH, LOOM_ACTIVATION_GELU_ERF, LOOM_ACTIVATION_RELU}) {
    const std::string name = act == LOOM_ACTIVATION_SILU ? "silu" : act == LOOM_ACTIVATION_GELU_TANH ? "gelu_tanh" : act == LOOM_ACTIVATION_GELU_ERF ? "gelu_erf" : "relu";
    add("glu." + name, [act](CaseContext& ctx, std::mt19937& rng) {
      const loom_glu_params p{sizeof(loom_glu_params), act};
      compare_with_reference(ctx, LOOM_OP_GLU, {f32_tensor(random_floats(rng, 300, -6, 6), 100, 3), f32_tensor(random_floats(rng, 300), 100, 3)},
                             zero_tensor(LOOM_DTYPE_F32, 100, 3), &p, kRowOpTolerance, "GLU " + std::to_string(act));
    });
    add("unary." + name, [act](CaseContext& ctx, std::mt19937& rng) {
      const loom_glu_params p{sizeof(loom_glu_params), act};
      compare_with_reference(ctx, LOOM_OP_UNARY, {f32_tensor(random_floats(rng, 300, -6, 6), 100, 3)},
                             zero_tensor(LOOM_DTYPE_F32, 100, 3), &p, kRowOpTolerance, "UNARY " + std::to_string(act));
    });
    // Saturation: vector forms built on exp() must saturate, not overflow to inf/NaN, far out. The
    // error is normalised by the largest output, so each group holds outputs of one magnitude: the
    // far-negative group's outputs are all ~0, where any leak (say -0.9 for -3e38) fails.
    add("unary." + name + ".large_inputs", [act](CaseContext& ctx, std::mt19937& rng) {
      const loom_glu_params p{sizeof(loom_glu_params), act};
      std::vector<float> moderate = random_floats(rng, 200, -120, 120);
      for (float edge : {0.0f, -0.0f, 88.0f, -88.0f}) moderate.push_back(edge);
      // 20 values each, so vector kernels see them in full vectors, not only in their scalar tails.
      std::vector<float> far_negative, far_positive;
      for (float v : {3e38f, 1e30f, 1e4f, 500.0f, 200.0f}) {
        for (float scale : {1.0f, 0.9f, 0.75f, 0.5f}) far_negative.push_back(-v * scale), far_positive.push_back(v * scale);
      }
      for (const std::vector<float>* x : std::vector<const std::vector<float>*>{&moderate, &far_negative, &far_positive}) {
        const int64_t n = int64_t(x->size());
        compare_with_reference(ctx, LOOM_OP_UNARY, std::vector<HostTensor>{f32_tensor(*x, n)}, zero_tensor(LOOM_DTYPE_F32, n), &p, kRowOpTolerance,
                               "UNARY " + std::to_string(act) + " large inputs");
      }
    });
  }
  for (loom_rope_mode mode : {LOOM_ROPE_NORMAL, LOOM_ROPE_NEOX}) {
    for (uint32_t n_dims : {64u, 32u}) {
      add(std::string("rope.") + (mode == LOOM_ROPE_NEOX ? "neox" : "normal") + ".dims" + std::to_string(n_dims),
          [mode, n_dims](CaseContext& ctx, std::mt19937& rng) {
            const loom_rope_params p{sizeof(loom_rope_params), mode, n_dims, 10000.0f, 1.0f, {}};
            const int64_t head_dim = 64, n_heads = 3, n_tok = 5;
            HostTensor pos = i32_tensor({0, 1, 17, 500, 4095}, n_tok);
            // Angles up to 4095 rad: a backend computing them in float may lose ~1e-4 of absolute
            // phase; 2e-4 normalised still catches wrong pairing, direction or frequencies.
            compare_with_reference(ctx, LOOM_OP_ROPE, {f32_tensor(random_floats(rng, size_t(head_dim * n_heads * n_tok)), head_dim, n_heads, n_tok), pos},
                                   zero_tensor(LOOM_DTYPE_F32, head_dim, n_heads, n_tok), &p, 2e-4, "ROPE");
          });
    }
    // ABI 1.1: per-pair frequency divisors (Llama 3.1's rope_freqs run from 1 to 8, LongRoPE's higher).
    add(std::string("rope.") + (mode == LOOM_ROPE_NEOX ? "neox" : "normal") + ".freq_factors",
        [mode](CaseContext& ctx, std::mt19937& rng) {
          const uint32_t n_dims = 48;
          const loom_rope_params p{sizeof(loom_rope_params), mode | LOOM_ROPE_FREQ_FACTORS, n_dims, 500000.0f, 1.0f, {}};
          const int64_t head_dim = 64, n_heads = 3, n_tok = 5;
          std::uniform_real_distribution<float> factor(1.0f, 40.0f);
          std::vector<float> factors(n_dims / 2);
          for (float& f : factors) f = factor(rng);
          HostTensor pos = i32_tensor({0, 1, 17, 500, 4095}, n_tok);
          compare_with_reference(ctx, LOOM_OP_ROPE,
                                 {f32_tensor(random_floats(rng, size_t(head_dim * n_heads * n_tok)), head_dim, n_heads, n_tok), pos,
                                  f32_tensor(factors, int64_t(factors.size()))},
                                 zero_tensor(LOOM_DTYPE_F32, head_dim, n_heads, n_tok), &p, 2e-4, "ROPE freq_factors");
        });
    // ABI 1.2: YaRN (factor 16, a ramp over pairs 3..11 of 24), alone and over frequency factors.
    for (const bool with_factors : {false, true}) {
      add(std::string("rope.") + (mode == LOOM_ROPE_NEOX ? "neox" : "normal") + (with_factors ? ".yarn_freq_factors" : ".yarn"),
          [mode, with_factors](CaseContext& ctx, std::mt19937& rng) {
            const uint32_t n_dims = 48;
            loom_rope_params p{sizeof(loom_rope_params), mode | LOOM_ROPE_YARN, n_dims, 1000000.0f, 1.0f / 16.0f, 1.0f, {3.0f, 11.0f}};
            std::vector<HostTensor> src;
            const int64_t head_dim = 64, n_heads = 3, n_tok = 5;
            src.push_back(f32_tensor(random_floats(rng, size_t(head_dim * n_heads * n_tok)), head_dim, n_heads, n_tok));
            src.push_back(i32_tensor({0, 1, 17, 500, 4095}, n_tok));
            if (with_factors) {
              p.mode |= LOOM_ROPE_FREQ_FACTORS;
              std::uniform_real_distribution<float> factor(1.0f, 8.0f);
              std::vector<float> factors(n_dims / 2);
              for (float& f : factors) f = factor(rng);
              src.push_back(f32_tensor(factors, int64_t(factors.size())));
            }
            compare_with_reference(ctx, LOOM_OP_ROPE, src, zero_tensor(LOOM_DTYPE_F32, head_dim, n_heads, n_tok), &p, 2e-4, "ROPE yarn");
          });
    }
  }
  // ABI 1.12: M-RoPE (Qwen2-VL). Sections {2, 3, 2, 1} over 10 pairs: sectors wrap after 8, so pairs 8
  // and 9 take the time and height components again, and pair 7 the extra one. ABI 1.13's interleaved
  // form (Qwen3-VL), sections {3, 2, 2, 1}: sectors 0, 3, 6 by time, 1, 4 by height, 2, 5 by width, 7
  // extra, then 8 and 9 wrap. Checked against the definition in double precision; each token's four
  // components differ, so a wrong section shows.
  auto mrope_case = [](bool interleaved) {
    return [interleaved](CaseContext& ctx, std::mt19937& rng) {
      const int sections[4] = {interleaved ? 3 : 2, interleaved ? 2 : 3, 2, 1};
      loom_rope_params p{sizeof(loom_rope_params), LOOM_ROPE_NEOX | LOOM_ROPE_MROPE | (interleaved ? LOOM_ROPE_MROPE_INTERLEAVED : 0),
                         20, 10000.0f, 1.0f, 0.0f, {0.0f, 0.0f}, {sections[0], sections[1], sections[2], sections[3]}};
      const int64_t head_dim = 24, n_heads = 2, n_tok = 3;
      const std::vector<int32_t> positions = {5, 40, 300, /* heights */ 6, 41, 310, /* widths */ 7, 45, 320, /* extra */ 1, 2, 3};
      const std::vector<float> xs = random_floats(rng, size_t(head_dim * n_heads * n_tok));
      HostTensor x = f32_tensor(xs, head_dim, n_heads, n_tok), pos = i32_tensor(positions, n_tok, 4);
      HostTensor dst = zero_tensor(LOOM_DTYPE_F32, head_dim, n_heads, n_tok);
      auto dut = device_under_test(ctx);
      const loom_status st = dut->run(LOOM_OP_ROPE, {&x, &pos}, &dst, &p);
      require(st == LOOM_STATUS_OK, "ROPE M-RoPE failed: " + dut->last_error());
      auto component_of = [&](int sector) {
        if (interleaved) {
          if (sector % 3 == 1 && sector < 3 * sections[1]) return 1;
          if (sector % 3 == 2 && sector < 3 * sections[2]) return 2;
          if (sector % 3 == 0 && sector < 3 * sections[0]) return 0;
          return 3;
        }
        for (int k = 0, end = 0; k < 3; k++)
          if (sector < (end += sections[k])) return k;
        return 3;
      };
      std::vector<float> want(xs);
      for (int64_t t = 0; t < n_tok; t++)
        for (int64_t h = 0; h < n_heads; h++) {
          const size_t base = size_t((t * n_heads + h) * head_dim);
          for (int64_t i = 0; i < 10; i++) {
            const int component = component_of(int(i % 8));
            const double theta = double(positions[size_t(component * n_tok + t)]) * std::pow(10000.0, -2.0 * double(i) / 20.0);
            const double a = xs[base + size_t(i)], b = xs[base + size_t(i + 10)];
            want[base + size_t(i)] = float(a * std::cos(theta) - b * std::sin(theta));
            want[base + size_t(i + 10)] = float(a * std::sin(theta) + b * std::cos(theta));
          }
        }
      require_close(dst.floats(), want, 2e-4, interleaved ? "ROPE interleaved M-RoPE" : "ROPE M-RoPE");
    };
  };
  add("rope.neox.mrope_sections", mrope_case(false));
  add("rope.neox.mrope_interleaved", mrope_case(true));
  const loom_dtype float_types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_BF16};
  for (loom_dtype from : float_types)
    for (loom_dtype to : float_types)
      add("copy." + dtype_label(from) + "_to_" + dtype_label(to), [from, to](CaseContext& ctx, std::mt19937& rng) {
        // Source values: random floats converted by the reference itself (COPY F32 → from).
        // Magnitudes from 1e-8 (F16 subnormals / underflow) to 6e4 (near F16's max).
        std::vector<float> values = random_floats(rng, 3 * 45);
        std::uniform_real_distribution<float> exponent(-8.0f, 4.7f);
        for (float& v : values) v *= std::pow(10.0f, exponent(rng));
        HostTensor src = f32_tensor(values, 45, 3);
        if (from != LOOM_DTYPE_F32) {
          auto ref = reference_device(ctx);
          HostTensor converted = zero_tensor(from, 45, 3);
          require(ref->run(LOOM_OP_COPY, {&src}, &converted, nullptr) == LOOM_STATUS_OK, "reference COPY failed");
          src = converted;
        }
        // F32 results must be exact (widening is exact; narrowing must round to nearest even).
        compare_with_reference(ctx, LOOM_OP_COPY, {src}, zero_tensor(to, 45, 3), nullptr, 0.0, "COPY");
      });
  return out;
}

std::vector<Case> buffer_cases() {
  std::vector<Case> out;
  out.push_back({"backend.copies_round_trip", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
                   auto dev = device_under_test(ctx);
                   const auto& api = dev->api();
                   std::mt19937 rng(7);
                   std::vector<uint8_t> data(10007);
                   for (auto& b : data) b = uint8_t(rng());
                   loom_buffer_t *a = nullptr, *b = nullptr;
                   require(api.buffer_create(dev->handle(), 20000, LOOM_BUFFER_USAGE_COMPUTE, &a) == LOOM_STATUS_OK, "buffer_create");
                   require(api.buffer_create(dev->handle(), 20000, LOOM_BUFFER_USAGE_COMPUTE, &b) == LOOM_STATUS_OK, "buffer_create");
                   std::vector<uint8_t> back(data.size());
                   const bool ok = api.copy_to_device(dev->handle(), nullptr, a, 13, data.data(), data.size()) == LOOM_STATUS_OK &&
                                   api.copy_buffer(dev->handle(), nullptr, b, 9000, a, 13, data.size()) == LOOM_STATUS_OK &&
                                   api.copy_to_host(dev->handle(), nullptr, back.data(), b, 9000, back.size()) == LOOM_STATUS_OK &&
                                   api.stream_synchronize(dev->handle(), nullptr) == LOOM_STATUS_OK;
                   const bool host_ptr_ok = !dev->caps().host_memory || (api.buffer_host_pointer && api.buffer_host_pointer(dev->handle(), b) != nullptr);
                   api.buffer_destroy(dev->handle(), a);
                   api.buffer_destroy(dev->handle(), b);
                   require(ok, "a copy failed: " + dev->last_error());
                   require(back == data, "bytes changed on the way device → device → host");
                   require(host_ptr_ok, "caps.host_memory = 1 but buffer_host_pointer returned NULL");
                 }});
  out.push_back({"backend.bounds_violation_is_an_error", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
                   auto dev = device_under_test(ctx);
                   const auto& api = dev->api();
                   loom_buffer_t* buf = nullptr;
                   require(api.buffer_create(dev->handle(), 1024, LOOM_BUFFER_USAGE_COMPUTE, &buf) == LOOM_STATUS_OK, "buffer_create");
                   std::vector<uint8_t> bytes(100);
                   const loom_status copy_st = api.copy_to_device(dev->handle(), nullptr, buf, 1000, bytes.data(), bytes.size());
                   // A MATMUL whose dst view runs past the end of its buffer.
                   loom_op op{};
                   op.struct_size = sizeof(op);
                   op.type = LOOM_OP_MATMUL;
                   op.n_src = 2;
                   auto view = [&](int64_t ne0, int64_t ne1, uint64_t offset) {
                     loom_tensor t{};
                     t.struct_size = sizeof(t);
                     t.dtype = LOOM_DTYPE_F32;
                     t.buffer = buf;
                     t.offset = offset;
                     t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = 1, t.ne[3] = 1;
                     t.nb[0] = 4, t.nb[1] = uint64_t(ne0) * 4, t.nb[2] = t.nb[3] = t.nb[1] * uint64_t(ne1);
                     return t;
                   };
                   op.src[0] = view(16, 8, 0);    // W [16, 8]: 512 bytes
                   op.src[1] = view(16, 2, 512);  // x [16, 2]: 128 bytes
                   op.dst = view(8, 2, 1000);     // dst [8, 2]: 64 bytes at 1000 > 1024
                   const loom_status op_st = api.run_ops(dev->handle(), nullptr, &op, 1);
                   api.stream_synchronize(dev->handle(), nullptr);
                   api.buffer_destroy(dev->handle(), buf);
                   require(copy_st != LOOM_STATUS_OK, "copy_to_device past the end of a buffer returned OK");
                   require(op_st != LOOM_STATUS_OK, "MATMUL with dst past the end of its buffer returned OK");
                 }});
  return out;
}

}  // namespace

std::vector<Case> backend_cases() {
  std::vector<Case> out = buffer_cases();
  for (loom_dtype dtype : kWeightTypes) {
    // 11, 33 and 70 tokens also reach batched paths (float GEMM from 8 tokens on AVX2, from 64 for types
    // decoded by the reference decoder) with their 3-, 1- and 2-token tails.
    for (int64_t n_tok : {1, 7, 11, 33, 70}) out.push_back(matmul_case(dtype, n_tok));
    // A vision encoder's batches (CPU: packed outer-product GEMM from 256 rows): rows longer than one
    // block of k, outputs past whole panels, a token tail.
    if (dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_F16 || dtype == LOOM_DTYPE_BF16) out.push_back(matmul_case(dtype, 301, 600, 70));
    out.push_back(matmul_batch_invariance_case(dtype));
    out.push_back(get_rows_case(dtype));
  }
  out.push_back(matmul_chain_case());
  for (auto& c : row_op_cases()) out.push_back(std::move(c));
  for (auto& c : backend_attention_cases()) out.push_back(std::move(c));
  for (auto& c : backend_moe_cases()) out.push_back(std::move(c));
  for (auto& c : backend_recurrent_cases()) out.push_back(std::move(c));
  for (auto& c : backend_encoder_cases()) out.push_back(std::move(c));
  for (auto& c : backend_lora_cases()) out.push_back(std::move(c));
  for (auto& c : backend_invariance_cases()) out.push_back(std::move(c));
  return out;
}

}  // namespace loom::conformance
