// Batch invariance to the bit (ABI 1.18): a backend created with "batch_invariant": true that says
// so in caps.batch_invariant must give every token of a MATMUL the bits it gets alone, whatever the
// batch around it. [engine] deterministic rests on this: a last-bit difference in one layer's output
// moves a value by a whole int8 step in the next, and a seeded sample then draws another token.
// (The tolerance-based backend.matmul.<type>.batch_invariant cases hold every backend to 1e-4.)
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "backend_support.h"

namespace loom::conformance {

using namespace backend;

namespace {

const loom_dtype kInvariantTypes[] = {LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_Q4_0,   LOOM_DTYPE_Q5_0,
                                      LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_Q5_K,   LOOM_DTYPE_Q4_1,
                                      LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K, LOOM_DTYPE_IQ4_NL, LOOM_DTYPE_IQ4_XS,
                                      LOOM_DTYPE_MXFP4, LOOM_DTYPE_F8_E4M3_B32};

// The instance under test, asked for batch invariance; not supported where it does not offer it.
std::unique_ptr<Device> invariant_device(const CaseContext& ctx) {
  nlohmann::json config = nlohmann::json::parse(ctx.plugin_config_json.empty() ? "{}" : ctx.plugin_config_json);
  config["batch_invariant"] = true;
  auto dut = std::make_unique<Device>(*ctx.plugin, ctx.host, config.dump());
  if (!dut->caps().batch_invariant) not_supported("caps.batch_invariant is 0 when asked for it (no batch-invariant mode)");
  return dut;
}

// Rows long enough for several blocks of every type and a SIMD tail (a multiple of 256 plus 32 where
// the block allows: K-quants need whole super-blocks).
int64_t row_length(loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q5_K:
    case LOOM_DTYPE_IQ4_XS:
    case LOOM_DTYPE_Q6_K: return 768;
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_F16:
    case LOOM_DTYPE_BF16: return 296;
    default: return 288;
  }
}

std::vector<float> matmul_of(Device& dut, HostTensor& w, const std::vector<float>& x, int64_t n_tok) {
  HostTensor input = f32_tensor(x, w.ne[0], n_tok), out = zero_tensor(LOOM_DTYPE_F32, w.ne[1], n_tok);
  const loom_status st = dut.run(LOOM_OP_MATMUL, {&w, &input}, &out, nullptr);
  require(st == LOOM_STATUS_OK, "MATMUL of " + std::to_string(n_tok) + " tokens failed (" + std::to_string(st) + "): " + dut.last_error());
  return out.floats();
}

Case bit_invariant_matmul_case(loom_dtype dtype) {
  return {"backend.matmul." + dtype_label(dtype) + ".bit_invariant", LOOM_PLUGIN_KIND_BACKEND, [=](CaseContext& ctx) {
            auto dut = invariant_device(ctx);
            if (!dut->declares_weight(dtype)) not_supported("caps do not declare " + dtype_label(dtype) + " weights");
            std::mt19937 rng(777 + uint32_t(dtype));
            const int64_t n_in = row_length(dtype), n_out = 45;
            HostTensor w = random_weights(rng, dtype, n_in, n_out);
            // One token (decode), a few (tiles and their tails), and batches past every panel and GEMM
            // threshold a backend might have (16, 64, 256 tokens).
            for (const int64_t n_tok : {2, 3, 5, 16, 19, 64, 70, 257}) {
              const std::vector<float> x = random_floats(rng, size_t(n_in * n_tok));
              const std::vector<float> batched = matmul_of(*dut, w, x, n_tok);
              for (int64_t t = 0; t < n_tok; t++) {
                const std::vector<float> alone =
                    matmul_of(*dut, w, std::vector<float>(x.begin() + t * n_in, x.begin() + (t + 1) * n_in), 1);
                require(std::memcmp(alone.data(), batched.data() + t * n_out, size_t(n_out) * sizeof(float)) == 0,
                        "MATMUL " + dtype_label(dtype) + ": token " + std::to_string(t) + " of " + std::to_string(n_tok) +
                            " differs from the same token alone (batch_invariant promises the same bits)");
              }
            }
          }};
}

// q, k and v of one decode row in one run_ops (a backend may run them together) give what three
// tokens of a batch give each of them.
Case bit_invariant_chain_case() {
  return {"backend.matmul.bit_invariant_decode_chain", LOOM_PLUGIN_KIND_BACKEND, [](CaseContext& ctx) {
            auto dut = invariant_device(ctx);
            std::mt19937 rng(4242);
            const loom_dtype types[] = {LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_Q8_0};
            const int64_t n_in = 512, n_out = 40;
            std::vector<HostTensor> tensors;
            for (const loom_dtype type : types) {
              if (!dut->declares_weight(type)) not_supported("caps do not declare " + dtype_label(type) + " weights");
              tensors.push_back(random_weights(rng, type, n_in, n_out));
            }
            const std::vector<float> row = random_floats(rng, size_t(n_in));
            tensors.push_back(f32_tensor(row, n_in, 1));
            std::vector<ChainOp> ops;
            for (size_t i = 0; i < 3; i++) {
              tensors.push_back(zero_tensor(LOOM_DTYPE_F32, n_out, 1));
              ops.push_back({LOOM_OP_MATMUL, {int(i), 3}, int(tensors.size()) - 1, nullptr});
            }
            const loom_status st = dut->run_chain(tensors, ops);
            require(st == LOOM_STATUS_OK, "the decode chain failed (" + std::to_string(st) + "): " + dut->last_error());
            std::vector<float> batch_rows = random_floats(rng, size_t(n_in * 6));
            std::copy(row.begin(), row.end(), batch_rows.begin() + 2 * n_in);  // the row as token 2 of 6
            for (size_t i = 0; i < 3; i++) {
              const std::vector<float> batched = matmul_of(*dut, tensors[i], batch_rows, 6);
              const std::vector<float> chained = tensors[4 + i].floats();
              require(std::memcmp(chained.data(), batched.data() + 2 * n_out, size_t(n_out) * sizeof(float)) == 0,
                      "decode chain matmul " + std::to_string(i) + " (" + dtype_label(types[i]) +
                          ") differs from the same row as token 2 of a batch of 6");
            }
          }};
}

}  // namespace

std::vector<Case> backend_invariance_cases() {
  std::vector<Case> out;
  for (const loom_dtype dtype : kInvariantTypes) out.push_back(bit_invariant_matmul_case(dtype));
  out.push_back(bit_invariant_chain_case());
  return out;
}

}  // namespace loom::conformance
