// The AVX-512 table's encoder attention (Kernels::encoder_attention): a vision encoder attends 4096
// patches to 4096, so the dot products are long in keys and short in the head (72 values). The tiled
// prefill pass reduces over the head with a horizontal sum per 9 FMAs; here keys lie across the
// vector lanes instead. Scores: the keys held transposed, for 4 query rows and 32 keys at a time each
// head value is a broadcast and 8 FMAs into registers, no sums across lanes (and the row maxima taken
// there too). Values: per key, 4 broadcast probabilities times the value row's vectors into up to 4 x 6
// accumulators. The softmax runs online over tiles of 256 keys, 8 query rows at a time, with a 16-lane
// exponential.
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

#include "float_weight_panels.h"

namespace loom::cpu {
namespace {

constexpr int64_t kTileKeys = 256;
constexpr int kRows = 4;        // query rows per register block of the weighted values
constexpr int kScoreRows = 8;   // and of the scores (16 accumulators: 10 loads per 16 FMAs)
constexpr int kMaxVectors = 8;  // head_dim <= 128
constexpr int64_t kWeighKeys = 64;  // keys per slice of the weighted values (in L1 for all the block's rows)

// scores[r][j] = q_r . k_j for R rows and the tile's keys [0, width) (width rounded up to 32; the
// transposed keys are zero-padded there), and each row's largest score, taken while the sums are in
// registers. Each block of 32 keys reads its head_dim x 32 transposed values in order (a whole row of
// transposed keys apart, they would fall in the same few L1 sets).
// The maxima leave out keys from `valid` on (the zero padding of a short tile).
template <int R>
inline void score_rows(const float* const* q, const float* kt, int64_t head_dim, int64_t width, int64_t valid, float* const* scores,
                       float* row_max) {
  __m512 mx[R];
  for (int r = 0; r < R; r++) mx[r] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < width; j += 32) {
    __m512 acc[R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const float* block = kt + j * head_dim;
    for (int64_t d = 0; d < head_dim; d++) {
      const __m512 k0 = _mm512_loadu_ps(block + d * 32), k1 = _mm512_loadu_ps(block + d * 32 + 16);
      for (int r = 0; r < R; r++) {
        const __m512 b = _mm512_set1_ps(q[r][d]);
        acc[r][0] = _mm512_fmadd_ps(k0, b, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(k1, b, acc[r][1]);
      }
    }
    const int64_t left = valid - j;
    const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
    const __mmask16 m1 = left >= 32 ? __mmask16(0xffff) : left <= 16 ? __mmask16(0) : __mmask16((1u << (left - 16)) - 1);
    for (int r = 0; r < R; r++) {
      _mm512_storeu_ps(scores[r] + j, acc[r][0]);
      _mm512_storeu_ps(scores[r] + j + 16, acc[r][1]);
      mx[r] = _mm512_mask_max_ps(mx[r], m0, mx[r], acc[r][0]);
      mx[r] = _mm512_mask_max_ps(mx[r], m1, mx[r], acc[r][1]);
    }
  }
  for (int r = 0; r < R; r++) row_max[r] = _mm512_reduce_max_ps(mx[r]);
}

// exp(x - shift) in 16 lanes: the AVX2 kernel's range reduction and degree-6 polynomial (exp_ps in
// activation_avx2.cpp), so both tables' softmaxes agree to rounding.
inline __m512 exp512(__m512 x) {
  const __mmask16 overflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.7f), _CMP_GT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.7f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n), half_n = _mm512_srai_epi32(ni, 1);
  const __m512 scale_a = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half_n, _mm512_set1_epi32(127)), 23));
  const __m512 scale_b = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ni, half_n), _mm512_set1_epi32(127)), 23));
  return _mm512_mask_blend_ps(overflow, _mm512_mul_ps(_mm512_mul_ps(p, scale_a), scale_b), _mm512_set1_ps(__builtin_huge_valf()));
}

// x[j] = exp(x[j] - shift) over n (a multiple of 16), -inf giving 0 (a causal row's hidden keys);
// returns their sum.
inline float exp_shifted_512(float* x, int64_t n, float shift) {
  const __m512 m = _mm512_set1_ps(shift), minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    __m512 e = exp512(_mm512_sub_ps(v, m));
    e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, minus_inf, _CMP_NEQ_OQ), e);
    _mm512_storeu_ps(x + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// x[j] = exp(x[j] - shift) over the first n values (the rest of the last vector untouched); returns
// their sum.
inline float exp_shifted_valid_512(float* x, int64_t n, float shift) {
  const __m512 m = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), m));
    _mm512_storeu_ps(x + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (j < n) {
    const __mmask16 tail = __mmask16((1u << (n - j)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(tail, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + j), m)));
    _mm512_mask_storeu_ps(x + j, tail, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
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

// Per tile of 256 keys and block of 8 query rows: the scores (8 KiB, in L1), their online softmax and
// the weighted values, before the next block, so the scores are written once and read twice from L1.
// The queries are scaled once up front, so the scores need no pass of their own.
bool encoder_attention(const EncoderAttentionBlock& b, float (*)(float* x, int64_t n, float shift)) {
  const int vectors = int((b.head_dim + 15) / 16);
  if (b.head_dim < 1 || vectors > kMaxVectors) return false;
  const __mmask16 last = b.head_dim % 16 == 0 ? __mmask16(0xffff) : __mmask16((1u << (b.head_dim % 16)) - 1);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  static thread_local std::vector<float> queries, scores, acc, row_max, row_sum;
  const int64_t stride = 16 * vectors;
  queries.resize(size_t(b.n_q * b.head_dim));
  for (int64_t i = 0; i < b.n_q; i++)
    for (int64_t d = 0; d < b.head_dim; d++) queries[size_t(i * b.head_dim + d)] = b.q[i * b.q_stride + d] * b.scale;
  scores.resize(size_t(kScoreRows * kTileKeys));
  acc.assign(size_t(b.n_q * stride), 0.0f);
  row_max.assign(size_t(b.n_q), kMinusInf);
  row_sum.assign(size_t(b.n_q), 0.0f);
  const int64_t last_key = b.causal ? std::min(b.n_keys, b.q_pos0 + b.n_q) : b.n_keys;  // keys any row sees
  for (int64_t k0 = 0; k0 < last_key; k0 += kTileKeys) {
    const int64_t width = std::min(kTileKeys, last_key - k0), padded = (width + 31) / 32 * 32;
    const float* kt = b.kt + k0 * b.head_dim;
    const float* v = b.v + k0 * b.v_stride;
    for (int64_t i0 = 0; i0 < b.n_q; i0 += kScoreRows) {
      const int rows = int(std::min<int64_t>(kScoreRows, b.n_q - i0));
      const float* q[kScoreRows];
      float* s[kScoreRows];
      float tile_max[kScoreRows];
      for (int r = 0; r < rows; r++) q[r] = queries.data() + (i0 + r) * b.head_dim, s[r] = scores.data() + r * kTileKeys;
      for (int r0 = 0; r0 < rows;) {  // 8 rows, then what is left in fours and ones
        const int n = rows - r0 >= 8 ? 8 : rows - r0 >= 4 ? 4 : 1;
        if (n == 8) score_rows<8>(q + r0, kt, b.head_dim, padded, width, s + r0, tile_max + r0);
        else if (n == 4) score_rows<4>(q + r0, kt, b.head_dim, padded, width, s + r0, tile_max + r0);
        else score_rows<1>(q + r0, kt, b.head_dim, padded, width, s + r0, tile_max + r0);
        r0 += n;
      }
      // Online softmax. The tile's maxima already leave out its zero padding; a causal row's keys past
      // its own become -inf and its maximum is taken again over the keys it sees.
      for (int r = 0; r < rows; r++) {
        const int64_t i = i0 + r;
        const int64_t visible = b.causal ? std::clamp<int64_t>(b.q_pos0 + i + 1 - k0, 0, width) : width;
        const bool masked = visible < width;
        if (masked) {
          std::fill(s[r] + visible, s[r] + padded, kMinusInf);
          tile_max[r] = visible > 0 ? *std::max_element(s[r], s[r] + visible) : kMinusInf;
        }
        const float m = std::max(row_max[size_t(i)], tile_max[r]);
        if (m == kMinusInf) {
          std::fill(s[r], s[r] + padded, 0.0f);
          continue;
        }
        const float rescale = std::exp(row_max[size_t(i)] - m);
        // Only the first `width` scores are weighed: the padding past them needs no exponential.
        const float sum = masked ? exp_shifted_512(s[r], padded, m) : exp_shifted_valid_512(s[r], width, m);
        row_sum[size_t(i)] = row_sum[size_t(i)] * rescale + sum;
        row_max[size_t(i)] = m;
        if (rescale != 1.0f) {
          float* a = acc.data() + i * stride;
          for (int64_t d = 0; d < stride; d += 16) _mm512_storeu_ps(a + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), _mm512_set1_ps(rescale)));
        }
      }
      // The tile's values in slices of kWeighKeys keys (18 KiB at head size 72), each weighed for all
      // the block's rows before the next: a whole tile's values (73 KiB) would stream from L2 once
      // per group of 4 rows.
      for (int64_t j0 = 0; j0 < width; j0 += kWeighKeys) {
        const int64_t keys = std::min(kWeighKeys, width - j0);
        const float* vj = v + j0 * b.v_stride;
        for (int r0 = 0; r0 < rows; r0 += kRows) {
          const int n = std::min(kRows, rows - r0);
          const float* p[kRows];
          float* a[kRows];
          for (int r = 0; r < n; r++) p[r] = s[r0 + r] + j0, a[r] = acc.data() + (i0 + r0 + r) * stride;
          // Many value vectors leave no registers for four rows: two at a time then.
          if (vectors > 6) {
            for (int r = 0; r < n; r += 2) {
              if (r + 1 < n) weigh_dispatch<2>(vectors, p + r, vj, b.v_stride, keys, last, a + r);
              else weigh_dispatch<1>(vectors, p + r, vj, b.v_stride, keys, last, a + r);
            }
            continue;
          }
          switch (n) {
            case 4: weigh_dispatch<4>(vectors, p, vj, b.v_stride, keys, last, a); break;
            case 3: weigh_dispatch<3>(vectors, p, vj, b.v_stride, keys, last, a); break;
            case 2: weigh_dispatch<2>(vectors, p, vj, b.v_stride, keys, last, a); break;
            default: weigh_dispatch<1>(vectors, p, vj, b.v_stride, keys, last, a); break;
          }
        }
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
// Below packed_min_tokens rows: the AVX2 kernel's shape in 512-bit registers, R weight rows x T
// activation rows of dot products over n (a multiple of 16), 4 x 4 = 16 accumulators, 8 loads per 16
// FMAs, one horizontal sum per output.
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

// From packed_min_tokens rows (a vision encoder's 4096, a long prefill): outer products, as BLIS-style
// kernels do. The weight rows are packed (once per chunk of rows) k-major in panels of 32 outputs, and
// each step of k broadcasts one value of each of up to 12 activation rows and multiplies it with the
// panel's two vectors, into 24 accumulators that stay in registers over a block of k: no horizontal
// sums, 14 loads per 24 FMAs, 1.4-1.6x the lane-wise kernel's rate on an encoder's matmuls. The packed
// rows: for each block of kDepth values of k, each panel's [depth][32] floats (rows past n_rows zero).
constexpr int kPanel = 32;        // outputs per panel
constexpr int kTokens = 12;       // activation rows per register block
constexpr int64_t kDepth = 256;   // values of k per block: a panel's block is 32 KiB, 12 rows' 12 KiB

template <int T, bool Add>
inline void outer_block(int64_t depth, const float* panel, const float* x, int64_t x_stride, float* dst, int64_t dst_stride,
                        __mmask16 m0, __mmask16 m1) {
  __m512 c[T][2];
  for (int t = 0; t < T; t++) {
    c[t][0] = Add ? _mm512_maskz_loadu_ps(m0, dst + t * dst_stride) : _mm512_setzero_ps();
    c[t][1] = Add ? _mm512_maskz_loadu_ps(m1, dst + t * dst_stride + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < depth; k++) {
    const __m512 b0 = _mm512_loadu_ps(panel + k * kPanel), b1 = _mm512_loadu_ps(panel + k * kPanel + 16);
    for (int t = 0; t < T; t++) {
      const __m512 a = _mm512_set1_ps(x[t * x_stride + k]);
      c[t][0] = _mm512_fmadd_ps(b0, a, c[t][0]);
      c[t][1] = _mm512_fmadd_ps(b1, a, c[t][1]);
    }
  }
  for (int t = 0; t < T; t++) {
    _mm512_mask_storeu_ps(dst + t * dst_stride, m0, c[t][0]);
    _mm512_mask_storeu_ps(dst + t * dst_stride + 16, m1, c[t][1]);
  }
}

template <bool Add, int T = kTokens>
inline void outer_rows(int tokens, int64_t depth, const float* panel, const float* x, int64_t x_stride, float* dst, int64_t dst_stride,
                       __mmask16 m0, __mmask16 m1) {
  if constexpr (T > 0) {
    if (tokens == T) return outer_block<T, Add>(depth, panel, x, x_stride, dst, dst_stride, m0, m1);
    return outer_rows<Add, T - 1>(tokens, depth, panel, x, x_stride, dst, dst_stride, m0, m1);
  }
}

void gemm_packed(int64_t n, const float* packed, int64_t, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tok, float* dst,
                 int64_t dst_stride) {
  const int64_t panels = weight_panel_count<kPanel>(n_rows);
  for (int64_t k0 = 0; k0 < n; k0 += kDepth) {
    const int64_t depth = std::min(kDepth, n - k0);
    // Each register block of activation rows (in L1) meets every panel of this block of k (in L2).
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokens) {
      const int tokens = int(std::min<int64_t>(kTokens, n_tok - t0));
      for (int64_t p = 0; p < panels; p++) {
        const int64_t left = std::min<int64_t>(kPanel, n_rows - p * kPanel);
        const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
        const __mmask16 m1 = left >= 32 ? __mmask16(0xffff) : left <= 16 ? __mmask16(0) : __mmask16((1u << (left - 16)) - 1);
        const float* panel = packed + k0 * panels * kPanel + p * depth * kPanel;
        const float* xs = x + t0 * x_stride + k0;
        float* d = dst + t0 * dst_stride + p * kPanel;
        if (k0 == 0) outer_rows<false>(tokens, depth, panel, xs, x_stride, d, dst_stride, m0, m1);
        else outer_rows<true>(tokens, depth, panel, xs, x_stride, d, dst_stride, m0, m1);
      }
    }
  }
}

}  // namespace

decltype(Kernels::encoder_attention) avx512_encoder_attention() { return encoder_attention; }

FloatGemm avx512_float_weight_gemm(const FloatGemm& avx2) {
  if (avx2.gemm == nullptr) return avx2;
  fallback_gemm = avx2.gemm;
  FloatGemm g;
  g.decoder = avx2.decoder;
  g.gemm = gemm_f32_512;
  g.packed_gemm = gemm_packed;
  g.packed_floats = weight_panel_floats<kPanel>;
  g.pack = pack_weight_panels<kPanel, kDepth>;
  g.packed_panel = kPanel;
  g.packed_min_tokens = 256;
  return g;
}

}  // namespace loom::cpu

#else

namespace loom::cpu {
decltype(Kernels::encoder_attention) avx512_encoder_attention() { return nullptr; }
FloatGemm avx512_float_weight_gemm(const FloatGemm& avx2) { return avx2; }
}  // namespace loom::cpu

#endif
