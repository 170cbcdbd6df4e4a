// The fast layer's inner loops, as a table of function pointers: one portable scalar table and one
// AVX2/FMA/F16C table, chosen at runtime from what the CPU supports.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/backend.h"

namespace loom::cpu {

// Activation rows are quantized once per matmul into these (internal, never stored):
struct BlockQ8 {  // for Q4_0 / Q5_0 / Q8_0 weights: 32 values
  float d;        // scale
  int8_t qs[32];
};
struct BlockQ8K {  // for Q4_K / Q6_K weights: 256 values
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sums of each group of 16 qs: applies K-quant mins/offsets without unpacking
};

inline constexpr int kMaxTile = 4;  // tokens a matmul kernel processes per pass over a weight row

// out[j] = dot(weight row w, activation row j) for j < n_x (n_x <= kMaxTile). Activation row j
// starts at x + j * x_stride bytes and is in the format the weight type asks for (see ActFormat).
using RowDotFn = void (*)(int64_t n, const void* w, const void* x, size_t x_stride, int n_x, float* out);

// The decode path (one activation row x): out[r] = dot(weight row r, x) for r < n_rows, weight rows
// w_stride bytes apart. One call per chunk of rows rather than per row, so the kernel can prefetch
// the rows it reads next and nothing is dispatched per row.
using RowsDotFn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out);

// A kernel may want its activation rows in a layout of its own (see kernels_avx512.cpp); it then
// brings the quantizer that writes one row, into at most kRowsActivationBytes(n) bytes. nullptr:
// the weight type's usual activation format (BlockQ8 / BlockQ8K rows, or floats).
using RowsQuantizeFn = void (*)(const float* x, void* out, int64_t n);
inline constexpr int64_t kRowsActivationBytes(int64_t n) { return 2 * n + n / 8 + 128; }

struct WeightKernels {
  RowDotFn tile;   // one weight row x up to kMaxTile activation rows (prefill, batches)
  RowsDotFn rows;  // many weight rows x one activation row (decode at batch 1)
  RowsQuantizeFn rows_quantize = nullptr;  // the activation layout `rows` reads
  RowsQuantizeFn tile_quantize = nullptr;  // the activation layout `tile` reads
};

// Batched matmuls as float GEMM, for tables whose FMA units outrun their int8 dot products (AVX2
// cores: about 45 vs 20 G multiply-adds/s per core). decoder(type) gives the vector decoder of one
// weight row to floats, nullptr where the type has none (it then keeps its integer tile kernel);
// gemm writes dst[t * dst_stride + r] = dot(w row r, x row t) for r < n_rows, t < n_tok, all strides
// in floats and n a multiple of 8.
using RowDecodeFn = void (*)(const void* row, float* out, int64_t n);
// One block of an encoder's attention (ATTENTION, ABI 1.9; Kernels::encoder_attention): n_q query rows
// of one head (q + i * q_stride) against n_keys keys held transposed in blocks of 32 keys
// (kt[(j / 32) * head_dim * 32 + d * 32 + j % 32], zeros past n_keys up to a multiple of 32, so each
// block's head_dim x 32 values are contiguous) and values as rows (v + j * v_stride). Output row i
// (out + i * out_stride) = softmax over the keys of scale * q_i . k_j, times the values: all n_keys keys,
// or those up to q_pos0 + i when causal. exp_shifted is the table's (exp_shifted_avx2's contract).
struct EncoderAttentionBlock {
  const float* q;
  int64_t q_stride, n_q, q_pos0;
  const float* kt;
  const float* v;
  int64_t v_stride, n_keys, head_dim;
  float scale;
  bool causal;
  float* out;
  int64_t out_stride;
};

struct FloatGemm {
  RowDecodeFn (*decoder)(loom_dtype type) = nullptr;
  // dst[t * dst_stride + r] = sum_k w[r][k] * x[t * x_stride + k] for r < n_rows, t < n_tok, k < n (w:
  // rows w_stride apart).
  void (*gemm)(int64_t n, const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
               int64_t dst_stride) = nullptr;
  // Optional, for batches of at least packed_min_tokens rows: the same product over weights packed
  // once per chunk of rows (pack: n_rows rows into packed_floats(n, n_rows) floats, panels of
  // packed_panel rows; packed_gemm reads them in place of w, w_stride unread). Its sums run in another
  // order than gemm's, so smaller batches keep gemm's (close to the one-row kernels').
  void (*packed_gemm)(int64_t n, const float* packed, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok,
                      float* dst, int64_t dst_stride) = nullptr;
  size_t (*packed_floats)(int64_t n, int64_t n_rows) = nullptr;
  void (*pack)(const float* w, int64_t w_stride, int64_t n, int64_t n_rows, float* packed) = nullptr;
  int64_t packed_panel = 0, packed_min_tokens = 0;
};

// Batched matmuls with the tokens across the vector lanes. A panel holds `tokens` activation rows
// quantized to int8 blocks and interleaved so that one vector load brings the same few values of
// every token: a weight row's matching bytes, broadcast, then meet all tokens in one multiply-add,
// and a block's sums end in the lanes, with no horizontal reduction per token. The tile kernels
// instead pay a reduction and a scale per (row, token, block pair), which held batched decode near
// 12 multiply-adds per cycle. A token's result must not depend on the panel width it lands in (see
// kernels_avx512_panel.cpp).
inline constexpr int kMaxPanelTokens = 16;
struct Kernels;
// quantize: tokens t < n_valid from rows[t] (n floats each), the lanes after them zero, rounded as
// the table k rounds a row for the type's other kernels.
using PanelQuantizeFn = void (*)(const Kernels& k, const float* const* rows, int n_valid, int64_t n, void* panel);
// dot: out[r * tokens + t] = dot(weight row r, token t) for r < n_rows, rows w_stride bytes apart.
using PanelDotFn = void (*)(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* panel, float* out);
struct PanelKernels {
  int tokens = 0;  // lanes per panel, at most kMaxPanelTokens
  PanelQuantizeFn quantize = nullptr;
  PanelDotFn dot = nullptr;
  size_t (*bytes)(int64_t n) = nullptr;  // one panel's size for rows of n values
  // Values per panel block: a panel of n values is n / block_values blocks of bytes(block_values)
  // each, and quantize may fill a range of whole blocks on its own (rows and panel offset to it).
  int64_t block_values = 32;
};
// A type's panels by width, narrowest first (dot == nullptr where the table has none): a batch
// packs into panels of the widest while at least that many tokens are left, and its last tokens
// into the narrowest that holds them, so few lanes are idle.
inline constexpr int kPanelWidths = 3;
struct PanelSet {
  PanelKernels widths[kPanelWidths];
};

struct Kernels {
  const char* name;
  void (*quantize_q8)(const float* x, BlockQ8* y, int64_t n);    // n multiple of 32
  void (*quantize_q8k)(const float* x, BlockQ8K* y, int64_t n);  // n multiple of 256
  WeightKernels q4_0, q5_0, q8_0, q4_k, q6_k;  // activations: BlockQ8 / BlockQ8K rows
  WeightKernels f16, bf16, f32;                 // activations: float rows
  // Attention and element-wise helpers.
  float (*vdot_f32)(const float* a, const float* b, int64_t n);
  float (*vdot_f16)(const uint16_t* a, const float* b, int64_t n);
  float (*vdot_i8)(const int8_t* a, const float* b, int64_t n);
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n);  // y += a * x
  void (*axpy_f16)(float a, const uint16_t* x, float* y, int64_t n);
  void (*axpy_i8)(float a, const int8_t* x, float* y, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  // out = act(g) * u (u may be null) for one row; false (nothing written) when the table has no
  // vector form of `act` and the caller must use the scalar activation.
  bool (*activation_row)(loom_activation act, const float* g, const float* u, float* out, int64_t n);
  // Integer kernels on BlockQ8K rows where the table has them ({nullptr, nullptr}: the types decode
  // rows to floats instead, dequant_kernels). Last, so the positional tables may leave them out.
  WeightKernels q5_k{nullptr, nullptr}, iq4_xs{nullptr, nullptr};
  // The same for BlockQ8 rows.
  WeightKernels q4_1{nullptr, nullptr}, q5_1{nullptr, nullptr}, iq4_nl{nullptr, nullptr};
  // The 2- and 3-bit K-quants on BlockQ8K rows.
  WeightKernels q2_k{nullptr, nullptr}, q3_k{nullptr, nullptr};
  // Matmuls of at least gemm_min_tokens activation rows through float GEMM; {} where the table
  // keeps its integer tiles for every batch.
  FloatGemm float_gemm{};
  int64_t gemm_min_tokens = 0;
  // MXFP4 on BlockQ8 rows (gpt-oss's experts); {nullptr, nullptr}: rows decode to floats instead.
  WeightKernels mxfp4{nullptr, nullptr};
  // Matmuls of at least panel_min_tokens activation rows through token panels (see PanelKernels);
  // {} where the table has none for the type.
  PanelSet q4_0_panels{}, q5_0_panels{}, q8_0_panels{}, q4_k_panels{}, q6_k_panels{};
  PanelSet q4_1_panels{}, q5_1_panels{}, iq4_nl_panels{}, q5_k_panels{}, iq4_xs_panels{};
  int64_t panel_min_tokens = 0;
  // Float dot products of many rows with many rows (FloatGemm::gemm's contract, n a multiple of 8),
  // for prefill attention's scores and weighted values; nullptr: attention walks one row at a time.
  void (*float_dots)(int64_t n, const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok,
                     float* dst, int64_t dst_stride) = nullptr;
  // Softmax's exponentials (exp_shifted_avx2's contract), beside float_dots.
  float (*exp_shifted)(float* x, int64_t n, float shift) = nullptr;
  // out[t * out_stride + d] = sum_j p[t * p_stride + j] * values[j * head_dim + d] for t < n_rows,
  // j < n_keys (a multiple of 8), d < head_dim (a multiple of 8), with exactly float_dots' arithmetic
  // over values transposed (eight lane sums in j order, then its horizontal sum), without the
  // transpose: attention uses it for a few rows and float_dots for many, and a row's result must
  // not depend on which.
  void (*weighted_values)(const float* p, int64_t p_stride, int64_t n_rows, int64_t n_keys, const float* values, int64_t head_dim,
                          float* out, int64_t out_stride) = nullptr;
  // The delta rule's state update, S = decay S + u k^T: s[j * n + i] = decay * s[j * n + i] + u[j] * k[i]
  // for j < rows, i < n. nullptr (the scalar table): the delta rule runs token by token.
  void (*decay_add_outer)(float* s, int64_t rows, int64_t n, float decay, const float* u, const float* k) = nullptr;
  // Float weights (F32, F16, BF16) have no integer kernels to keep batches on: batches of at least
  // float_weight_gemm_min_tokens rows take this GEMM even where float_gemm is off ({}: none).
  FloatGemm float_weight_gemm{};
  int64_t float_weight_gemm_min_tokens = 0;
  // An encoder attention block (EncoderAttentionBlock) with broadcasts and FMAs across keys and value
  // dimensions, no horizontal sums; false (nothing written) for a head size it does not take. nullptr:
  // ATTENTION runs the tiled prefill pass.
  bool (*encoder_attention)(const EncoderAttentionBlock& block, float (*exp_shifted)(float* x, int64_t n, float shift)) = nullptr;
  // FP8 weights (LOOM_DTYPE_F8_E4M3_B32) on float activation rows; {nullptr, nullptr}: rows decode
  // to floats through the reference decoder instead (kernels_dequant.cpp).
  WeightKernels f8_e4m3_b32{nullptr, nullptr};
  // Batch invariance (the backend's "batch_invariant" config, ABI 1.18): every matmul, one row or
  // many, takes the `tile` kernels, whose arithmetic per activation row is the same whatever the
  // tile's width (each row keeps its own sums, in block order). The decode kernels (`rows`), panels
  // and GEMMs each sum in an order of their own, so a token's bits would depend on its batch.
  bool tiles_only = false;
};

const Kernels& scalar_kernels();
const Kernels* avx2_kernels();    // nullptr when the plugin was built without the AVX2 file
const Kernels* avx512_kernels();  // the AVX2 table with AVX-512 Q4_0/Q5_0/Q8_0, K-quant and IQ4_XS kernels; nullptr if not built

}  // namespace loom::cpu
