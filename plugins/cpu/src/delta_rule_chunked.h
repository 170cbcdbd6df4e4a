// The gated delta rule over a run of tokens in chunks (the WY / UT form of chunked DeltaNet, as
// llama.cpp's build_delta_net_chunking and the flash-linear-attention kernels compute it), for the
// fast layer's prefill. Token by token, each token reads and rewrites the whole [d_k, d_v] state
// with two horizontal dot products per state row; in chunks, the state is read twice and written
// once per chunk, and the rest is products of small dense matrices (Kernels::float_dots).
#pragma once

#include <cstdint>
#include <functional>

namespace loom::cpu {

// Kernels::float_dots: dst[t * dst_stride + r] = dot(w row r, x row t) over n (a multiple of 8).
using FloatDotsFn = void (*)(int64_t n, const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride,
                             int64_t n_tok, float* dst, int64_t dst_stride);
// Kernels::axpy_f32: y += a * x.
using AxpyFn = void (*)(float a, const float* x, float* y, int64_t n);
// Kernels::decay_add_outer: S = decay S + u k^T over `rows` rows of n floats.
using DecayAddOuterFn = void (*)(float* s, int64_t rows, int64_t n, float decay, const float* u, const float* k);
struct DeltaChunkKernels {
  FloatDotsFn dots = nullptr;
  AxpyFn axpy = nullptr;
  DecayAddOuterFn decay_add_outer = nullptr;
};

// One (sequence, value head)'s tokens 0..n-1, as the op's tensors hold them.
struct DeltaRuleTokens {
  int64_t d_k = 0, d_v = 0;
  float q_scale = 1.0f;
  std::function<void(int64_t t, float* q, float* k)> load_qk;  // token t's q and k, normalised as the op says
  std::function<const float*(int64_t t)> v;
  std::function<float(int64_t t)> log_decay, beta;
  std::function<float*(int64_t t)> out;
};

// Chunks of this many tokens. The intra-chunk products grow with it and the state passes shrink:
// llama.cpp takes 64, but on the AVX-512 Xeon (loom_cpu_kernel_bench delta, 32 heads of 128, 2
// threads) 32 ran 45-55 us per token, 16 51-55 and 64 47-62, against 115-125 token by token.
inline constexpr int64_t kDeltaRuleChunk = 32;

// Whether the chunked form can run: all three kernels present, d_k and d_v multiples of 8.
bool delta_rule_chunked_fits(const DeltaChunkKernels& k, int64_t d_k, int64_t d_v);

// One token over `state`: the chunked form with a chunk of one. Both dot products of every state
// row (with k and with q) come from one float_dots pass over the old state, since
//   S_new q = g S q + u (k . q)   with   u = b (v - g S k),
// and a second pass writes S_new = g S + u k^T. The token-by-token rule instead needs two
// horizontal sums per row, each waiting on the last.
void delta_rule_token(const DeltaRuleTokens& tokens, int64_t t, float* state, const DeltaChunkKernels& k);

// Runs n tokens over `state` (S[i, j] at state[j * d_k + i], as GATED_DELTA_NET stores it), writing
// each token's output and leaving the state after the last token. Equal to the token-by-token rule
// up to float rounding (a different summation order).
void delta_rule_chunked(const DeltaRuleTokens& tokens, int64_t n, float* state, const DeltaChunkKernels& k);

}  // namespace loom::cpu
