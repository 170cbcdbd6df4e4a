// AVX-512 (F/BW/VL/VNNI) kernels for Q4_0, Q5_0 and Q8_0. Decode at batch 1 is meant to be
// memory-bound, but on two cores the AVX2 Q5_0 kernel tops out near 12 GB/s with its weights in
// cache, no faster than DRAM delivers them, so its DRAM stalls are never hidden. Here each step takes
// two blocks in one 512-bit register, vpdpbusd multiplies and sums the bytes in one instruction, four
// rows share each activation load, and the activation values stay in element order (an earlier
// layout in the nibbles' order saved one shuffle per step but needed a shuffle of Q5_0's fifth bits;
// element order measured 5% faster for Q5_0 with weights in cache, 2% for Q4_0). Paired runs against
// AVX2 (in the earlier layout): one-token Q5_0 +30%, Q4_0 +39% with
// weights in cache; the default model's 640 x 262144 Q8_0 output matrix, memory-bound, +5-8%;
// 16-token tiles +20-28%). Q4_K and Q6_K come from kernels_avx512_kquants.cpp, the token panels from
// kernels_avx512_panel*.cpp and attention's weighted values from kernels_avx512_attention.cpp; other
// weight types and ops keep the AVX2 table. This file alone is compiled with -mavx512*; FastOps checks the
// CPU before using it.
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__F16C__)

// GCC 12's AVX-512 intrinsics fill "don't care" operands from _mm512_undefined_*(), which its own
// -Wmaybe-uninitialized / -Wuninitialized then report inside the headers; nothing here reads an
// undefined lane.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_tensor.h"
#include "ggml_blocks.h"
#include "kernels_avx512_attention.h"
#include "kernels_avx512_encoder.h"
#include "kernels_avx512_common.h"
#include "kernels_avx512_kquants.h"
#include "kernels_avx512_panel.h"

namespace loom::cpu {
namespace {

using avx512::h2f;
using avx512::quantize_block;
using avx512::QuantizedBlock;

// ---- the activation rows ------------------------------------------------------------------------
// Each row is quantized to int8 per 32-value block like the AVX2 table's BlockQ8 (same scale, same
// rounding, so the integer sums are identical), but stored for 64-byte loads: all int8 values first
// (n bytes), then one float scale per block, then, from the next 64-byte boundary, one 16 x int32
// "offset term" per block pair (see the kernels below).
struct ActRow {
  const int8_t* q;
  const float* d;
  const int32_t* offset_terms;  // 16 per block pair
};
inline size_t offset_terms_at(int64_t n) { return size_t(n + 4 * (n / 32) + 63) / 64 * 64; }
inline ActRow act_row(const void* x, int64_t n) {
  const auto* q = static_cast<const int8_t*>(x);
  return {q, reinterpret_cast<const float*>(q + n), reinterpret_cast<const int32_t*>(q + offset_terms_at(n))};
}
static_assert(kRowsActivationBytes(4096) >= 4096 + 4 * 128 + 63 + 4096, "activation row layout does not fit");

template <int kOffset>
void quantize_row(const float* x, void* out, int64_t n) {
  auto* q = static_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(q + n);
  const int64_t nb = n / 32;
  for (int64_t b = 0; b < nb; b++) {
    const QuantizedBlock block = quantize_block(x + 32 * b);
    d[b] = block.scale;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), block.half[0]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), block.half[1]);
  }
  // The offset term of a pair: int32 lane k holds -offset x (the four activation bytes 4k..4k+3).
  auto* terms = reinterpret_cast<int32_t*>(q + offset_terms_at(n));
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t pair = 0; pair < nb / 2; pair++) {
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(q + 64 * pair));
    _mm512_storeu_si512(terms + 16 * pair, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-kOffset)));
  }
}

// For the formats with a min (Q4_1, Q5_1: w = d q + m): the same values and scales, and in place of
// the offset terms each block's scaled sum, y.d[b] x sum(q), as floats (the min's term m x that).
void quantize_row_with_sums(const float* x, void* out, int64_t n) {
  quantize_row<0>(x, out, n);
  const auto* q = static_cast<const int8_t*>(out);
  const auto* d = reinterpret_cast<const float*>(q + n);
  auto* sums = reinterpret_cast<float*>(static_cast<uint8_t*>(out) + offset_terms_at(n));
  for (int64_t b = 0; b < n / 32; b++) {
    int sum = 0;
    for (int i = 0; i < 32; i++) sum += q[32 * b + i];
    sums[b] = d[b] * float(sum);
  }
}

// ---- kernels --------------------------------------------------------------------------------------
// Each weight format gives its two-block step as unsigned bytes u (in the activation row's order)
// with a fixed offset: the weights are u - offset. Then sum((u - offset) * y) = vpdpbusd(u, y) plus
// -offset x sum(y), exact in int32. The second term depends on the activations only, so the
// quantizer computes it once per block pair and every weight row starts its sums from it.

// Q4_0/Q5_0 nibbles of blocks b and b + 1 in element order: each block's 16 bytes go to two 128-bit
// quarters, the second shifted down to its high nibbles, [b 0-15, b 16-31, b+1 0-15, b+1 16-31].
inline __m512i nibble_pair(const uint8_t* qs0, const uint8_t* qs1) {
  constexpr __mmask32 kHighQuarters = 0xFF00FF00u;  // int16 lanes of quarters 1 and 3
  const __m256i raw = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(qs1), reinterpret_cast<const __m128i*>(qs0));
  const __m512i doubled = _mm512_shuffle_i64x2(_mm512_castsi256_si512(raw), _mm512_castsi256_si512(raw), _MM_SHUFFLE(1, 1, 0, 0));
  return _mm512_and_si512(_mm512_mask_srli_epi16(doubled, kHighQuarters, doubled, 4), _mm512_set1_epi8(0x0F));
}

// The 4-bit formats (Q4_0, Q4_1): nibbles, element i in the low nibble of qs[i], i + 16 in the high.
template <typename B, int kOffsetValue>
struct FourBitFormat {
  using Block = B;
  static constexpr int kOffset = kOffsetValue;
  static __m512i pair(const Block& a, const Block& b) { return nibble_pair(a.qs, b.qs); }
  // Elements i and i + 16 (i < 16), unsigned.
  static int low(const Block& w, int i) { return w.qs[i] & 0xF; }
  static int high(const Block& w, int i) { return w.qs[i] >> 4; }
};

// The 5-bit formats (Q5_0, Q5_1): the nibbles plus fifth bits, bit j of qh for element j.
template <typename B, int kOffsetValue>
struct FiveBitFormat {
  using Block = B;
  static constexpr int kOffset = kOffsetValue;
  static __m512i pair(const Block& a, const Block& b) {
    // The two blocks' masks side by side are the pair's mask.
    uint32_t h0, h1;
    std::memcpy(&h0, a.qh, 4);
    std::memcpy(&h1, b.qh, 4);
    const __m512i q = nibble_pair(a.qs, b.qs);
    return _mm512_mask_add_epi8(q, _cvtu64_mask64(h0 | uint64_t(h1) << 32), q, _mm512_set1_epi8(0x10));
  }
  static int fifth_bit(const Block& w, int j) { return ((w.qh[j / 8] >> (j % 8)) & 1) << 4; }
  static int low(const Block& w, int i) { return (w.qs[i] & 0xF) | fifth_bit(w, i); }
  static int high(const Block& w, int i) { return (w.qs[i] >> 4) | fifth_bit(w, i + 16); }
};

using Q4_0Format = FourBitFormat<loom_block_q4_0, 8>;
using Q5_0Format = FiveBitFormat<loom_block_q5_0, 16>;

// Q4_1 / Q5_1: no offset, and a min per block (rows only: their activation rows carry the blocks'
// scaled sums, quantize_row_with_sums).
struct Q4_1Format : FourBitFormat<BlockQ4_1, 0> {
  static float min(const Block& w) { return h2f(w.m); }
};
struct Q5_1Format : FiveBitFormat<BlockQ5_1, 0> {
  static float min(const Block& w) { return h2f(w.m); }
};

template <typename F>
constexpr bool kHasMin = requires(const typename F::Block& b) { F::min(b); };

// IQ4_NL: Q4_0's layout, each nibble picking one of sixteen signed levels; the table holds them plus
// 128, so the bytes are unsigned with offset 128 as Q8_0's.
struct IQ4_NLFormat {
  using Block = BlockIQ4NL;
  static constexpr int kOffset = 128;
  static __m512i pair(const Block& a, const Block& b) {
    const __m512i table = _mm512_broadcast_i32x4(avx512::iq4_level_table());
    return _mm512_shuffle_epi8(table, nibble_pair(a.qs, b.qs));
  }
  static int low(const Block& w, int i) { return kIq4Levels[w.qs[i] & 0xF] + 128; }
  static int high(const Block& w, int i) { return kIq4Levels[w.qs[i] >> 4] + 128; }
};
static_assert([] {
  for (int i = 0; i < 16; i++)
    if (kIq4Levels[i] + 128 != avx512::kIq4LevelsPlus128[i]) return false;
  return true;
}(), "kIq4LevelsPlus128 is kIq4Levels + 128");

struct Q8_0Format {
  using Block = loom_block_q8_0;
  static constexpr int kOffset = 128;  // q + 128, as unsigned bytes: flip the sign bit
  static __m512i pair(const Block& a, const Block& b) {
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs))),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static int low(const Block& w, int i) { return w.qs[i] + 128; }
  static int high(const Block& w, int i) { return w.qs[i + 16] + 128; }
};

// A pair's 16 int32 sums: lanes 0-7 belong to block b, lanes 8-15 to block b + 1.
constexpr __mmask16 kSecondBlock = 0xFF00;
inline __m512 pair_scale(float first, float second) {
  return _mm512_mask_blend_ps(kSecondBlock, _mm512_set1_ps(first), _mm512_set1_ps(second));
}

// sum((w - offset) * y) over one block in natural order, for odd block counts. Kept out of line and
// unvectorised: GCC 12 miscompiled this loop when it vectorised it inside dot_rows<Q4_0Format, 1>
// with AVX-512 enabled (a sum of 25 came out as -12263; conformance's odd-block cases caught it).
template <typename F>
[[gnu::noinline, gnu::optimize("no-tree-vectorize")]] int tail_block(const typename F::Block& w, const int8_t* y) {
  int isum = 0;
  for (int i = 0; i < 16; i++) isum += (F::low(w, i) - F::kOffset) * y[i] + (F::high(w, i) - F::kOffset) * y[i + 16];
  return isum;
}

// The weight scales of R <= 4 rows for blocks b and b + 1, times the activation scales: lane 2r + k
// holds d(row r, block b + k) x y.d[b + k]. One conversion and one multiply serve all the rows.
template <typename Block, int R>
inline __m256 pair_scales(const Block* const* rows, int64_t b, const float* y_d) {
  static_assert(R >= 1 && R <= 4, "pair_scales covers up to four rows");
  uint16_t d[8] = {};
  for (int r = 0; r < R; r++) d[2 * r] = rows[r][b].d, d[2 * r + 1] = rows[r][b + 1].d;
  const __m128i halves = _mm_set_epi16(short(d[7]), short(d[6]), short(d[5]), short(d[4]), short(d[3]), short(d[2]), short(d[1]), short(d[0]));
  const __m256 y_pair = _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(y_d + b)));
  return _mm256_mul_ps(_mm256_cvtph_ps(halves), y_pair);
}

// For row r, the permutation that spreads lanes 2r and 2r + 1 of pair_scales over a pair's 16 int32
// sums.
inline __m512i scale_lanes(int r) {
  alignas(64) int32_t idx[16];
  for (int k = 0; k < 16; k++) idx[k] = 2 * r + ((kSecondBlock >> k) & 1);
  return _mm512_load_si512(idx);
}

// out[r] = dot(weight row r, y) for R rows at once: the activation loads, the offset term and the
// activation scales are shared, and R independent accumulators keep the FMA latency hidden (a 640-
// wide row is only ten steps long).
template <typename F, int R>
void dot_rows(int64_t n, const uint8_t* w, size_t w_stride, ActRow y, float* out, const uint8_t* prefetch = nullptr,
              size_t prefetch_bytes = 0) {
  using Block = typename F::Block;
  const int64_t nb = n / 32;
  const Block* rows[R];
  for (int r = 0; r < R; r++) rows[r] = reinterpret_cast<const Block*>(w + size_t(r) * w_stride);
  __m512 acc[R];
  __m512i lanes[R];
  for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps(), lanes[r] = scale_lanes(r);
  int64_t b = 0;
  // Prefetch the next group's rows spread over the steps, a few lines per step: a burst of them at
  // once overflows the line-fill buffers and most are dropped.
  const size_t lines_per_step = nb >= 2 ? (prefetch_bytes / 64 + size_t(nb / 2)) / size_t(nb / 2) : 0;
  size_t prefetched = 0;
  // The formats with a min add m x (the block's scaled activation sum) per block, apart.
  [[maybe_unused]] const auto* block_sums = reinterpret_cast<const float*>(y.offset_terms);
  float min_terms[R] = {};
  for (; b + 2 <= nb; b += 2) {
    for (size_t l = 0; l < lines_per_step && prefetched < prefetch_bytes; l++, prefetched += 64)
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + prefetched), _MM_HINT_T0);
    const __m512i yv = _mm512_loadu_si512(y.q + 32 * b);
    const __m512i base = kHasMin<F> ? _mm512_setzero_si512() : _mm512_loadu_si512(y.offset_terms + 8 * b);
    const __m512 scales = _mm512_castps256_ps512(pair_scales<Block, R>(rows, b, y.d));
    for (int r = 0; r < R; r++) {
      const __m512i sums = _mm512_dpbusd_epi32(base, F::pair(rows[r][b], rows[r][b + 1]), yv);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(lanes[r], scales), acc[r]);
      if constexpr (kHasMin<F>) min_terms[r] += F::min(rows[r][b]) * block_sums[b] + F::min(rows[r][b + 1]) * block_sums[b + 1];
    }
  }
  for (int r = 0; r < R; r++) {
    float total = _mm512_reduce_add_ps(acc[r]);
    if (b < nb) {  // an odd last block, in natural order
      const Block& blk = rows[r][b];
      total += h2f(blk.d) * y.d[b] * float(tail_block<F>(blk, y.q + 32 * b));
      if constexpr (kHasMin<F>) min_terms[r] += F::min(blk) * block_sums[b];
    }
    out[r] = total + min_terms[r];
  }
}

// The decode rows loop: groups of four rows, prefetching the next group as the AVX2 loop does
// (see kernels_avx2.cpp for why).
template <typename F>
void rows_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out) {
  constexpr int64_t kGroup = 4;
  const auto* p = static_cast<const uint8_t*>(w);
  const ActRow y = act_row(x, n);
  int64_t r = 0;
  for (; r + kGroup <= n_rows; r += kGroup) {
    const int64_t ahead_rows = std::min<int64_t>(kGroup, n_rows - (r + kGroup));
    dot_rows<F, kGroup>(n, p + size_t(r) * w_stride, w_stride, y, out + r, p + size_t(r + kGroup) * w_stride,
                        size_t(ahead_rows) * w_stride);
  }
  for (; r < n_rows; r++) dot_rows<F, 1>(n, p + size_t(r) * w_stride, w_stride, y, out + r);
}

// One weight row x NX activation rows (prefill and batched decode): each block pair is unpacked once
// and used for every row of the tile. Activation row j starts at x + j * x_stride.
template <typename F, int NX>
void dot_tile(int64_t n, const void* w, const void* x, size_t x_stride, float* out) {
  using Block = typename F::Block;
  const auto* wb = static_cast<const Block*>(w);
  const int64_t nb = n / 32;
  ActRow y[NX];
  for (int j = 0; j < NX; j++) y[j] = act_row(static_cast<const uint8_t*>(x) + size_t(j) * x_stride, n);
  __m512 acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm512_setzero_ps();
  // Each row's two activation scales, one 8-byte load spread over the pair's lanes by one permute
  // (building them from two scalar products and broadcasts cost more than the dot product).
  const __m512i spread = scale_lanes(0);
  // Weight rows are contiguous in every matrix the tiles run over, so the next row starts where this
  // one ends: fetch it a line per step. A batch of few tokens (a mixture-of-experts matmul gives each
  // expert about four) streams its weights from DRAM at the pace of the dot products, and without
  // this most steps waited on the hardware prefetcher (LOOM_CPU_PROFILE, synthetic qwen3moe, batch 16).
  const char* next_row = reinterpret_cast<const char*>(wb + 2 * nb);
  const int64_t next_lines = int64_t(nb * sizeof(Block) + 63) / 64;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if (b / 2 < next_lines) _mm_prefetch(next_row + 64 * (b / 2), _MM_HINT_T0);
    if (b / 2 + nb / 2 < next_lines) _mm_prefetch(next_row + 64 * (b / 2 + nb / 2), _MM_HINT_T0);
    const __m512i q = F::pair(wb[b], wb[b + 1]);
    const __m512 w_scales = pair_scale(h2f(wb[b].d), h2f(wb[b + 1].d));
    for (int j = 0; j < NX; j++) {
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_loadu_si512(y[j].offset_terms + 8 * b), q, _mm512_loadu_si512(y[j].q + 32 * b));
      const __m128 y_pair = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(y[j].d + b)));
      const __m512 y_scales = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(y_pair));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(w_scales, y_scales), acc[j]);
    }
  }
  for (int j = 0; j < NX; j++) {
    float total = _mm512_reduce_add_ps(acc[j]);
    if (b < nb) total += h2f(wb[b].d) * y[j].d[b] * float(tail_block<F>(wb[b], y[j].q + 32 * b));
    out[j] = total;
  }
}

template <typename F>
void tile_dot(int64_t n, const void* w, const void* x, size_t x_stride, int n_x, float* out) {
  static_assert(kMaxTile == 4, "tile_dot instantiates 1..4 rows");
  switch (n_x) {
    case 1: return dot_tile<F, 1>(n, w, x, x_stride, out);
    case 2: return dot_tile<F, 2>(n, w, x, x_stride, out);
    case 3: return dot_tile<F, 3>(n, w, x, x_stride, out);
    default: return dot_tile<F, 4>(n, w, x, x_stride, out);
  }
}

Kernels make_table(const Kernels& avx2) {
  Kernels k = avx2;
  k.name = "avx512";
  constexpr auto q4_0_layout = quantize_row<Q4_0Format::kOffset>;
  constexpr auto q5_0_layout = quantize_row<Q5_0Format::kOffset>;
  k.q4_0 = {tile_dot<Q4_0Format>, rows_dot<Q4_0Format>, q4_0_layout, q4_0_layout};
  k.q5_0 = {tile_dot<Q5_0Format>, rows_dot<Q5_0Format>, q5_0_layout, q5_0_layout};
  constexpr auto q8_0_layout = quantize_row<Q8_0Format::kOffset>;
  k.q8_0 = {tile_dot<Q8_0Format>, rows_dot<Q8_0Format>, q8_0_layout, q8_0_layout};
  // Q4_1 / Q5_1: mat-vec only; their tiles stay the AVX2 table's (on BlockQ8 rows), and batches of 3
  // tokens or more go to the panels.
  k.q4_1 = {avx2.q4_1.tile, rows_dot<Q4_1Format>, quantize_row_with_sums, nullptr};
  k.q5_1 = {avx2.q5_1.tile, rows_dot<Q5_1Format>, quantize_row_with_sums, nullptr};
  constexpr auto iq4_nl_layout = quantize_row<IQ4_NLFormat::kOffset>;
  k.iq4_nl = {tile_dot<IQ4_NLFormat>, rows_dot<IQ4_NLFormat>, iq4_nl_layout, iq4_nl_layout};
  // K-quants: kernels_avx512_kquants.cpp (their activations stay BlockQ8K rows).
  k.q4_k.rows = avx512_q4_k_rows();
  k.q6_k.rows = avx512_q6_k_rows();
  k.q4_k.tile = avx512_q4_k_tile();
  k.q6_k.tile = avx512_q6_k_tile();
  // vpdpbusd does 64 int8 multiply-adds per instruction, four times an FMA's 16 floats: batches stay
  // on the integer tiles here.
  k.float_gemm = {};
  k.gemm_min_tokens = 0;
  add_avx512_panels(k);
  k.weighted_values = avx512_weighted_values();
  k.encoder_attention = avx512_encoder_attention();
  k.float_weight_gemm = avx512_float_weight_gemm(avx2.float_weight_gemm);
  return k;
}

}  // namespace

const Kernels* avx512_kernels() {
  const Kernels* avx2 = avx2_kernels();
  if (avx2 == nullptr) return nullptr;
  static const Kernels table = make_table(*avx2);
  return &table;
}

}  // namespace loom::cpu

#else  // not built for AVX-512

namespace loom::cpu {
const Kernels* avx512_kernels() { return nullptr; }
}  // namespace loom::cpu

#endif
