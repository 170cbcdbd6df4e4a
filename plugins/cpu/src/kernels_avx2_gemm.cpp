// Batched matmuls on AVX2 as float GEMM: weight rows decoded to floats once per chunk, then a
// register-blocked FMA kernel over every activation row.
//
// Why floats and not the int8 tiles: each 32-value int8 block needs two multiplies (vpmaddubsw, then
// vpmaddwd to reach int32), then a conversion and an FMA for its scale, and the tiles re-read the
// activations for every weight row. The float kernel below keeps a 3 x 4 block of dot products in
// registers, so each load feeds several FMAs; decoding a weight row to floats costs about half an
// instruction per value, paid once per chunk and shared by every token. On a 2-core AVX2 EPYC
// (loom_cpu_kernel_bench) it wins from 8 tokens on: 20-45% at 16 tokens, 1.3-1.9x at 512. The caller
// rounds the activations as the integer kernels do (fast_matmul.cpp), so results do not depend on the
// batch a row ran in. From 256 rows of float weights (an embedding model's batches), weight rows
// packed into panels meet the tokens as outer products instead (gemm_packed).
#include "kernels_avx2_gemm.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "float_weight_panels.h"

#include <cstring>

#include "cpu_tensor.h"
#include "ggml_blocks.h"
#include "kernels_avx2_common.h"
#include "kernels_avx2_fp8.h"

namespace loom::cpu {
namespace {

using namespace avx2;

// ---- weight rows to floats ---------------------------------------------------------------------------

// 32 signed bytes as 32 floats, the first 16 times `first`, the last 16 times `second`.
inline void store_scaled_2x16(__m256i q, __m256 first, __m256 second, float* out) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  _mm256_storeu_ps(out + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), first));
  _mm256_storeu_ps(out + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), first));
  _mm256_storeu_ps(out + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), second));
  _mm256_storeu_ps(out + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), second));
}
inline void store_scaled_32(__m256i q, __m256 scale, float* out) { store_scaled_2x16(q, scale, scale, out); }

// 32 unsigned bytes q as scale * q - offset.
inline void store_affine_32(__m256i q, __m256 scale, __m256 offset, float* out) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int p = 0; p < 4; p++)
    _mm256_storeu_ps(out + 8 * p, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[p])), scale), offset));
}

void decode_q8_0(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const loom_block_q8_0*>(row);
  for (int64_t i = 0; i < n / 32; i++, out += 32)
    store_scaled_32(SignedQ8_0::load(b[i]), _mm256_set1_ps(h2f(b[i].d)), out);
}

void decode_q4_0(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const loom_block_q4_0*>(row);
  for (int64_t i = 0; i < n / 32; i++, out += 32)
    store_scaled_32(SignedQ4_0::load(b[i]), _mm256_set1_ps(h2f(b[i].d)), out);
}

void decode_q5_0(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const loom_block_q5_0*>(row);
  for (int64_t i = 0; i < n / 32; i++, out += 32) store_scaled_32(SignedQ5_0::load(b[i]), _mm256_set1_ps(h2f(b[i].d)), out);
}

void decode_q4_k(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const loom_block_q4_k*>(row);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < n / 256; i++) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    for (int c = 0; c < 4; c++, out += 64) {  // sub-blocks 2c (low nibbles) and 2c+1 (high)
      uint8_t sc, m;
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs + 32 * c));
      get_scale_min_k4(2 * c, b[i].scales, &sc, &m);
      store_affine_32(_mm256_and_si256(raw, mask), _mm256_set1_ps(d * sc), _mm256_set1_ps(dmin * m), out);
      get_scale_min_k4(2 * c + 1, b[i].scales, &sc, &m);
      store_affine_32(_mm256_and_si256(_mm256_srli_epi16(raw, 4), mask), _mm256_set1_ps(d * sc), _mm256_set1_ps(dmin * m), out + 32);
    }
  }
}

void decode_q6_k(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const loom_block_q6_k*>(row);
  const __m256i offset = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < n / 256; i++) {
    const float d = h2f(b[i].d);
    for (int h = 0; h < 2; h++, out += 128) {
      __m256i q[4];
      unpack_q6_k_128(b[i].ql + 64 * h, b[i].qh + 32 * h, q);
      const int8_t* sc = b[i].scales + 8 * h;
      for (int k = 0; k < 4; k++)  // values 32k..32k+15 use scale 2k, the next 16 scale 2k+1
        store_scaled_2x16(_mm256_sub_epi8(q[k], offset), _mm256_set1_ps(d * float(sc[2 * k])), _mm256_set1_ps(d * float(sc[2 * k + 1])),
                          out + 32 * k);
    }
  }
}

// IQ4_NL: Q4_0's layout, each nibble an index into the 16 levels.
void decode_iq4_nl(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const loom_block_q4_0*>(row);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels)));
  for (int64_t i = 0; i < n / 32; i++, out += 32)
    store_scaled_32(_mm256_shuffle_epi8(table, unpack_nibbles_32(b[i].qs)), _mm256_set1_ps(h2f(b[i].d)), out);
}

// IQ4_XS: 256 values in 8 runs of 32, each with its own 6-bit scale, and IQ4_NL's nibble order
// within a run.
void decode_iq4_xs(const void* row, float* out, int64_t n) {
  const auto* b = static_cast<const BlockIQ4XS*>(row);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels)));
  for (int64_t i = 0; i < n / 256; i++) {
    const float d = h2f(b[i].d);
    for (int r = 0; r < 8; r++, out += 32)
      store_scaled_32(_mm256_shuffle_epi8(table, unpack_nibbles_32(b[i].qs + 16 * r)), _mm256_set1_ps(d * float(iq4_xs_run_scale(b[i], r))), out);
  }
}

void decode_f16(const void* row, float* out, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; i++) out[i] = h2f(h[i]);
}

void decode_bf16(const void* row, float* out, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))), 16)));
  for (; i < n; i++) out[i] = bf16_to_float(h[i]);
}

void decode_f32(const void* row, float* out, int64_t n) { std::memcpy(out, row, size_t(n) * sizeof(float)); }

// ---- the FMA kernel ----------------------------------------------------------------------------------

// R weight rows x T activation rows, accumulated over n (a multiple of 8) in R*T registers. 3 x 4
// keeps 12 accumulators, 3 weight vectors and one activation vector in the 16 registers: 7 loads per
// 12 FMAs (4 x 2 measured 20% slower: 6 loads per 8).
template <int R, int T>
inline void block_kernel(int64_t n, const float* w, int64_t w_stride, const float* x, int64_t x_stride, float* dst, int64_t dst_stride) {
  __m256 acc[R][T];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
  for (int64_t k = 0; k < n; k += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; r++) wv[r] = _mm256_loadu_ps(w + r * w_stride + k);
    for (int t = 0; t < T; t++) {
      const __m256 xv = _mm256_loadu_ps(x + t * x_stride + k);
      for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < T; t++)
    for (int r = 0; r < R; r++) dst[t * dst_stride + r] = hsum(acc[r][t]);
}

template <int R>
inline void rows_kernel(int64_t n, const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
                        int64_t dst_stride) {
  int64_t t = 0;
  for (; t + 4 <= n_tok; t += 4) block_kernel<R, 4>(n, w, w_stride, x + t * x_stride, x_stride, dst + t * dst_stride, dst_stride);
  float* d = dst + t * dst_stride;
  x += t * x_stride;
  switch (n_tok - t) {
    case 3: return block_kernel<R, 3>(n, w, w_stride, x, x_stride, d, dst_stride);
    case 2: return block_kernel<R, 2>(n, w, w_stride, x, x_stride, d, dst_stride);
    case 1: return block_kernel<R, 1>(n, w, w_stride, x, x_stride, d, dst_stride);
    default: return;
  }
}

void gemm_f32(int64_t n, const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
              int64_t dst_stride) {
  int64_t r = 0;
  for (; r + 3 <= n_rows; r += 3) rows_kernel<3>(n, w + r * w_stride, w_stride, x, x_stride, n_tok, dst + r, dst_stride);
  switch (n_rows - r) {
    case 2: return rows_kernel<2>(n, w + r * w_stride, w_stride, x, x_stride, n_tok, dst + r, dst_stride);
    case 1: return rows_kernel<1>(n, w + r * w_stride, w_stride, x, x_stride, n_tok, dst + r, dst_stride);
    default: return;
  }
}

// ---- the packed outer-product kernel (large batches) ------------------------------------------------

// From packed_min_tokens rows (an encoder's batches, a long prefill): outer products, the shape of
// BLIS's Haswell kernel. Weight rows are packed once per chunk, k-major in panels of 16 outputs; each
// step of k loads a panel's two vectors and broadcasts one value of each of 6 activation rows into 12
// accumulators that stay in registers over a block of k: no horizontal sums, 8 loads per 12 FMAs.
// gemm_f32 above instead ends every (row, token) dot in a horizontal sum and keeps 7 loads per 12
// FMAs in flight from seven streams. Packed: for each block of kDepth values of k, each panel's
// [depth][16] floats (rows past n_rows zero).
constexpr int kPanel = 16;       // outputs per panel: two vectors
constexpr int kTokens = 6;       // activation rows per register block: 12 accumulators
constexpr int64_t kDepth = 256;  // values of k per block: a panel's block is 16 KiB, in L1 while the tokens pass
constexpr int64_t kPackedMinTokens = 256;

// T activation rows x one panel over `depth` values of k; Add: onto what dst holds (later blocks of k).
template <int T, bool Add>
inline void outer_block(int64_t depth, const float* panel, const float* x, int64_t x_stride, float* dst, int64_t dst_stride) {
  __m256 c[T][2];
  for (int t = 0; t < T; t++) {
    c[t][0] = Add ? _mm256_loadu_ps(dst + t * dst_stride) : _mm256_setzero_ps();
    c[t][1] = Add ? _mm256_loadu_ps(dst + t * dst_stride + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < depth; k++) {
    const __m256 b0 = _mm256_loadu_ps(panel + k * kPanel), b1 = _mm256_loadu_ps(panel + k * kPanel + 8);
    for (int t = 0; t < T; t++) {
      const __m256 a = _mm256_broadcast_ss(x + t * x_stride + k);
      c[t][0] = _mm256_fmadd_ps(b0, a, c[t][0]);
      c[t][1] = _mm256_fmadd_ps(b1, a, c[t][1]);
    }
  }
  for (int t = 0; t < T; t++) {
    _mm256_storeu_ps(dst + t * dst_stride, c[t][0]);
    _mm256_storeu_ps(dst + t * dst_stride + 8, c[t][1]);
  }
}

template <bool Add, int T = kTokens>
inline void outer_rows(int tokens, int64_t depth, const float* panel, const float* x, int64_t x_stride, float* dst, int64_t dst_stride) {
  if constexpr (T > 0) {
    if (tokens == T) return outer_block<T, Add>(depth, panel, x, x_stride, dst, dst_stride);
    return outer_rows<Add, T - 1>(tokens, depth, panel, x, x_stride, dst, dst_stride);
  }
}

// A panel's register block, written through a 16-wide scratch block where the panel's last outputs
// lie past n_rows (AVX2 has no masked stores of floats as cheap as a copy of a few rows).
template <bool Add>
void outer_panel(int tokens, int live, int64_t depth, const float* panel, const float* x, int64_t x_stride, float* dst, int64_t dst_stride) {
  if (live == kPanel) return outer_rows<Add>(tokens, depth, panel, x, x_stride, dst, dst_stride);
  float partial[kTokens * kPanel] = {};
  for (int t = 0; Add && t < tokens; t++) std::copy(dst + t * dst_stride, dst + t * dst_stride + live, partial + t * kPanel);
  outer_rows<Add>(tokens, depth, panel, x, x_stride, partial, kPanel);
  for (int t = 0; t < tokens; t++) std::copy(partial + t * kPanel, partial + t * kPanel + live, dst + t * dst_stride);
}

void gemm_packed(int64_t n, const float* packed, int64_t, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
                 int64_t dst_stride) {
  const int64_t panels = weight_panel_count<kPanel>(n_rows);
  for (int64_t k0 = 0; k0 < n; k0 += kDepth) {
    const int64_t depth = std::min(kDepth, n - k0);
    // Each panel's block of k (16 KiB, in L1) meets every activation row's block (in L2).
    for (int64_t p = 0; p < panels; p++) {
      const float* panel = packed + k0 * panels * kPanel + p * depth * kPanel;
      const int live = int(std::min<int64_t>(kPanel, n_rows - p * kPanel));
      for (int64_t t0 = 0; t0 < n_tok; t0 += kTokens) {
        const int tokens = int(std::min<int64_t>(kTokens, n_tok - t0));
        const float* xs = x + t0 * x_stride + k0;
        float* d = dst + t0 * dst_stride + p * kPanel;
        if (k0 == 0) outer_panel<false>(tokens, live, depth, panel, xs, x_stride, d, dst_stride);
        else outer_panel<true>(tokens, live, depth, panel, xs, x_stride, d, dst_stride);
      }
    }
  }
}

RowDecodeFn decoder(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_Q8_0: return decode_q8_0;
    case LOOM_DTYPE_Q4_0: return decode_q4_0;
    case LOOM_DTYPE_Q5_0: return decode_q5_0;
    case LOOM_DTYPE_Q4_K: return decode_q4_k;
    case LOOM_DTYPE_Q6_K: return decode_q6_k;
    case LOOM_DTYPE_IQ4_NL: return decode_iq4_nl;
    case LOOM_DTYPE_IQ4_XS: return decode_iq4_xs;
    case LOOM_DTYPE_F16: return decode_f16;
    case LOOM_DTYPE_BF16: return decode_bf16;
    case LOOM_DTYPE_F32: return decode_f32;
    case LOOM_DTYPE_F8_E4M3_B32: return avx2_f8_e4m3_b32_decoder();
    default: return nullptr;
  }
}

// gemm_f32's dot for output (t, d) over j keeps lane l = j mod 8 in one accumulator, fma(V[j][d],
// p[j], acc), and ends in hsum's tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Here the
// same eight accumulators run across d in vectors, and the same tree adds them.
void weighted_values(const float* p, int64_t p_stride, int64_t n_rows, int64_t n_keys, const float* values, int64_t head_dim, float* out,
                     int64_t out_stride) {
  static thread_local std::vector<float> lanes;  // 8 x head_dim: lane l's sums for every d
  const int64_t n_vec = head_dim / 8;
  lanes.resize(size_t(8 * head_dim));
  for (int64_t t = 0; t < n_rows; t++) {
    std::fill(lanes.begin(), lanes.end(), 0.0f);
    const float* pt = p + t * p_stride;
    for (int64_t j = 0; j < n_keys; j++) {
      const __m256 pj = _mm256_set1_ps(pt[j]);
      float* lane = lanes.data() + (j % 8) * head_dim;
      const float* v = values + j * head_dim;
      for (int64_t c = 0; c < n_vec; c++)
        _mm256_storeu_ps(lane + 8 * c, _mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * c), pj, _mm256_loadu_ps(lane + 8 * c)));
    }
    float* o = out + t * out_stride;
    for (int64_t c = 0; c < n_vec; c++) {
      auto l = [&](int i) { return _mm256_loadu_ps(lanes.data() + i * head_dim + 8 * c); };
      const __m256 even = _mm256_add_ps(_mm256_add_ps(l(0), l(4)), _mm256_add_ps(l(2), l(6)));
      const __m256 odd = _mm256_add_ps(_mm256_add_ps(l(1), l(5)), _mm256_add_ps(l(3), l(7)));
      _mm256_storeu_ps(o + 8 * c, _mm256_add_ps(even, odd));
    }
  }
}

}  // namespace

FloatGemm avx2_float_gemm() {
  FloatGemm g;
  g.decoder = decoder;
  g.gemm = gemm_f32;
  g.packed_gemm = gemm_packed;
  g.packed_floats = weight_panel_floats<kPanel>;
  g.pack = pack_weight_panels<kPanel, kDepth>;
  g.packed_panel = kPanel;
  g.packed_min_tokens = kPackedMinTokens;
  return g;
}
decltype(Kernels::weighted_values) avx2_weighted_values() { return weighted_values; }

}  // namespace loom::cpu

#else

namespace loom::cpu {
FloatGemm avx2_float_gemm() { return {}; }
decltype(Kernels::weighted_values) avx2_weighted_values() { return nullptr; }
}  // namespace loom::cpu

#endif
