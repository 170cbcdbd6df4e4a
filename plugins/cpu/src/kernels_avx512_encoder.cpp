// The AVX-512 table's encoder attention (Kernels::encoder_attention): a vision encoder attends 4096
// patches to 4096, so the dot products are long in keys and short in the head (72 values). The tiled
// prefill pass reduces over the head with a horizontal sum per 9 FMAs; here keys lie across the
// vector lanes instead. Scores: the keys held transposed, for 4 query rows and 32 keys at a time each
// head value is a broadcast and 8 FMAs into registers, no sums across lanes. Values: per key, 4
// broadcast probabilities times the value row's vectors into up to 4 x 6 accumulators. The softmax runs
// online over tiles of 256 keys.
#include "kernels_avx512_encoder.h"

#if defined(__AVX512F__)

// GCC 12 warns inside its own intrinsics' headers (_mm512_reduce_max_ps, masked multiplies).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace loom::cpu {
namespace {

constexpr int64_t kTileKeys = 256;
constexpr int kRows = 4;        // query rows per register block of the weighted values
constexpr int kScoreRows = 8;   // and of the scores (16 accumulators: 10 loads per 16 FMAs)
constexpr int kMaxVectors = 8;  // head_dim <= 128

// scores[r][j] = q_r . k_j for R rows and the tile's keys [0, width) (width rounded up to 32; the
// transposed keys are zero-padded there).
template <int R>
inline void score_rows(const float* const* q, const float* kt, int64_t kt_stride, int64_t head_dim, int64_t width, float* const* scores) {
  for (int64_t j = 0; j < width; j += 32) {
    __m512 acc[R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t d = 0; d < head_dim; d++) {
      const __m512 k0 = _mm512_loadu_ps(kt + d * kt_stride + j), k1 = _mm512_loadu_ps(kt + d * kt_stride + j + 16);
      for (int r = 0; r < R; r++) {
        const __m512 b = _mm512_set1_ps(q[r][d]);
        acc[r][0] = _mm512_fmadd_ps(k0, b, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(k1, b, acc[r][1]);
      }
    }
    for (int r = 0; r < R; r++) {
      _mm512_storeu_ps(scores[r] + j, acc[r][0]);
      _mm512_storeu_ps(scores[r] + j + 16, acc[r][1]);
    }
  }
}

// acc[r] += sum_j p[r][j] * v_j over keys [0, n), for R rows and C vectors of the head (the last one
// masked to head_dim).
template <int R, int C>
inline void weigh_rows(const float* const* p, const float* v, int64_t v_stride, int64_t n, __mmask16 last, float* const* acc) {
  __m512 a[R][C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) a[r][c] = _mm512_loadu_ps(acc[r] + 16 * c);
  for (int64_t j = 0; j < n; j++) {
    __m512 vv[C];
    for (int c = 0; c < C; c++) vv[c] = _mm512_maskz_loadu_ps(c == C - 1 ? last : __mmask16(0xffff), v + j * v_stride + 16 * c);
    for (int r = 0; r < R; r++) {
      const __m512 b = _mm512_set1_ps(p[r][j]);
      for (int c = 0; c < C; c++) a[r][c] = _mm512_fmadd_ps(vv[c], b, a[r][c]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) _mm512_storeu_ps(acc[r] + 16 * c, a[r][c]);
}

template <int R>
void weigh_dispatch(int c, const float* const* p, const float* v, int64_t v_stride, int64_t n, __mmask16 last, float* const* acc) {
  switch (c) {
    case 1: return weigh_rows<R, 1>(p, v, v_stride, n, last, acc);
    case 2: return weigh_rows<R, 2>(p, v, v_stride, n, last, acc);
    case 3: return weigh_rows<R, 3>(p, v, v_stride, n, last, acc);
    case 4: return weigh_rows<R, 4>(p, v, v_stride, n, last, acc);
    case 5: return weigh_rows<R, 5>(p, v, v_stride, n, last, acc);
    case 6: return weigh_rows<R, 6>(p, v, v_stride, n, last, acc);
    case 7: return weigh_rows<R, 7>(p, v, v_stride, n, last, acc);
    case 8: return weigh_rows<R, 8>(p, v, v_stride, n, last, acc);
    default: return;
  }
}

bool encoder_attention(const EncoderAttentionBlock& b, float (*exp_shifted)(float* x, int64_t n, float shift)) {
  const int vectors = int((b.head_dim + 15) / 16);
  if (b.head_dim < 1 || vectors > kMaxVectors || exp_shifted == nullptr) return false;
  const __mmask16 last = b.head_dim % 16 == 0 ? __mmask16(0xffff) : __mmask16((1u << (b.head_dim % 16)) - 1);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  static thread_local std::vector<float> scores, acc, row_max, row_sum;
  const int64_t stride = 16 * vectors;
  scores.resize(size_t(b.n_q * kTileKeys));
  acc.assign(size_t(b.n_q * stride), 0.0f);
  row_max.assign(size_t(b.n_q), kMinusInf);
  row_sum.assign(size_t(b.n_q), 0.0f);
  const int64_t last_key = b.causal ? std::min(b.n_keys, b.q_pos0 + b.n_q) : b.n_keys;  // keys any row sees
  for (int64_t k0 = 0; k0 < last_key; k0 += kTileKeys) {
    const int64_t width = std::min(kTileKeys, last_key - k0), padded = (width + 31) / 32 * 32;
    for (int64_t i0 = 0; i0 < b.n_q; i0 += kScoreRows) {
      const int rows = int(std::min<int64_t>(kScoreRows, b.n_q - i0));
      const float* q[kScoreRows];
      float* s[kScoreRows];
      for (int r = 0; r < rows; r++) q[r] = b.q + (i0 + r) * b.q_stride, s[r] = scores.data() + (i0 + r) * kTileKeys;
      const float* kt = b.kt + k0;
      for (int r0 = 0; r0 < rows;) {  // 8 rows, then what is left in fours and ones
        const int n = rows - r0 >= 8 ? 8 : rows - r0 >= 4 ? 4 : 1;
        if (n == 8) score_rows<8>(q + r0, kt, b.kt_stride, b.head_dim, padded, s + r0);
        else if (n == 4) score_rows<4>(q + r0, kt, b.kt_stride, b.head_dim, padded, s + r0);
        else score_rows<1>(q + r0, kt, b.kt_stride, b.head_dim, padded, s + r0);
        r0 += n;
      }
    }
    // Online softmax: each row's scaled scores, its visible keys only (-inf past them, 0 once exponentiated).
    for (int64_t i = 0; i < b.n_q; i++) {
      float* s = scores.data() + i * kTileKeys;
      const int64_t visible = b.causal ? std::clamp<int64_t>(b.q_pos0 + i + 1 - k0, 0, width) : width;
      __m512 vmax = _mm512_set1_ps(kMinusInf);
      const __m512 vscale = _mm512_set1_ps(b.scale), minus_inf = _mm512_set1_ps(kMinusInf);
      for (int64_t j = 0; j < padded; j += 16) {
        const int64_t seen = std::clamp<int64_t>(visible - j, 0, 16);
        const __mmask16 keep = seen == 16 ? __mmask16(0xffff) : __mmask16((1u << seen) - 1);
        const __m512 x = _mm512_mask_mul_ps(minus_inf, keep, _mm512_loadu_ps(s + j), vscale);
        _mm512_storeu_ps(s + j, x);
        vmax = _mm512_max_ps(vmax, x);
      }
      const float tile_max = _mm512_reduce_max_ps(vmax);
      const float m = std::max(row_max[size_t(i)], tile_max);
      if (m == kMinusInf) {
        std::fill(s, s + padded, 0.0f);
        continue;
      }
      const float rescale = std::exp(row_max[size_t(i)] - m);
      row_sum[size_t(i)] = row_sum[size_t(i)] * rescale + exp_shifted(s, padded, m);
      row_max[size_t(i)] = m;
      if (rescale != 1.0f)
        for (int64_t d = 0; d < stride; d++) acc[size_t(i * stride + d)] *= rescale;
    }
    for (int64_t i0 = 0; i0 < b.n_q; i0 += kRows) {
      const int rows = int(std::min<int64_t>(kRows, b.n_q - i0));
      const float* p[kRows];
      float* a[kRows];
      for (int r = 0; r < rows; r++) p[r] = scores.data() + (i0 + r) * kTileKeys, a[r] = acc.data() + (i0 + r) * stride;
      const float* v = b.v + k0 * b.v_stride;
      // Many value vectors leave no registers for four rows: two at a time then.
      if (vectors > 6) {
        for (int r = 0; r < rows; r += 2) {
          if (r + 1 < rows) weigh_dispatch<2>(vectors, p + r, v, b.v_stride, width, last, a + r);
          else weigh_dispatch<1>(vectors, p + r, v, b.v_stride, width, last, a + r);
        }
        continue;
      }
      switch (rows) {
        case 4: weigh_dispatch<4>(vectors, p, v, b.v_stride, width, last, a); break;
        case 3: weigh_dispatch<3>(vectors, p, v, b.v_stride, width, last, a); break;
        case 2: weigh_dispatch<2>(vectors, p, v, b.v_stride, width, last, a); break;
        default: weigh_dispatch<1>(vectors, p, v, b.v_stride, width, last, a); break;
      }
    }
  }
  for (int64_t i = 0; i < b.n_q; i++) {
    const float inv = row_sum[size_t(i)] > 0.0f ? 1.0f / row_sum[size_t(i)] : 0.0f;
    float* out = b.out + i * b.out_stride;
    for (int64_t d = 0; d < b.head_dim; d++) out[d] = acc[size_t(i * stride + d)] * inv;
  }
  return true;
}

// ---- float GEMM for float weights (Kernels::float_weight_gemm) ------------------------------------------
// The AVX2 kernel's shape in 512-bit registers: R weight rows x T activation rows of dot products over
// n (a multiple of 16), 4 x 4 = 16 accumulators, 8 loads per 16 FMAs, one horizontal sum per output.
template <int R, int T, bool Add>
inline void gemm_block(int64_t n, const float* w, int64_t w_stride, const float* x, int64_t x_stride, float* dst, int64_t dst_stride) {
  __m512 acc[R][T];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < n; k += 16) {
    __m512 wv[R];
    for (int r = 0; r < R; r++) wv[r] = _mm512_loadu_ps(w + r * w_stride + k);
    for (int t = 0; t < T; t++) {
      const __m512 xv = _mm512_loadu_ps(x + t * x_stride + k);
      for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < T; t++)
    for (int r = 0; r < R; r++) {
      const float sum = _mm512_reduce_add_ps(acc[r][t]);
      dst[t * dst_stride + r] = Add ? dst[t * dst_stride + r] + sum : sum;
    }
}

template <int R, bool Add>
inline void gemm_rows(int64_t n, const float* w, int64_t w_stride, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
                      int64_t dst_stride) {
  int64_t t = 0;
  for (; t + 4 <= n_tok; t += 4) gemm_block<R, 4, Add>(n, w, w_stride, x + t * x_stride, x_stride, dst + t * dst_stride, dst_stride);
  for (; t < n_tok; t++) gemm_block<R, 1, Add>(n, w, w_stride, x + t * x_stride, x_stride, dst + t * dst_stride, dst_stride);
}

template <bool Add>
void gemm_slice(int64_t n, const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
                int64_t dst_stride) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) gemm_rows<4, Add>(n, w + r * w_stride, w_stride, x, x_stride, n_tok, dst + r, dst_stride);
  for (; r < n_rows; r++) gemm_rows<1, Add>(n, w + r * w_stride, w_stride, x, x_stride, n_tok, dst + r, dst_stride);
}

// Long rows (an FFN's down projection, 4304 values) are summed in slices of this many values, so the
// 4 weight rows and 4 activation rows of a block stay in L1 (32 KiB) across its tokens.
constexpr int64_t kSliceValues = 1024;

void (*fallback_gemm)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t) = nullptr;

void gemm_f32_512(int64_t n, const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
                  int64_t dst_stride) {
  if (n % 16 != 0) return fallback_gemm(n, w, w_stride, n_rows, x, x_stride, n_tok, dst, dst_stride);  // the AVX2 kernel takes n % 8
  gemm_slice<false>(std::min(n, kSliceValues), w, w_stride, n_rows, x, x_stride, n_tok, dst, dst_stride);
  for (int64_t k0 = kSliceValues; k0 < n; k0 += kSliceValues)
    gemm_slice<true>(std::min(n - k0, kSliceValues), w + k0, w_stride, n_rows, x + k0, x_stride, n_tok, dst, dst_stride);
}

}  // namespace

decltype(Kernels::encoder_attention) avx512_encoder_attention() { return encoder_attention; }

FloatGemm avx512_float_weight_gemm(const FloatGemm& avx2) {
  if (avx2.gemm == nullptr) return avx2;
  fallback_gemm = avx2.gemm;
  return {avx2.decoder, gemm_f32_512};
}

}  // namespace loom::cpu

#else

namespace loom::cpu {
decltype(Kernels::encoder_attention) avx512_encoder_attention() { return nullptr; }
FloatGemm avx512_float_weight_gemm(const FloatGemm& avx2) { return avx2; }
}  // namespace loom::cpu

#endif
