// The AVX2 table's encoder attention (Kernels::encoder_attention): an embedding model's heads are short
// (32 values in all-MiniLM) and its inputs a few hundred keys long, so the tiled prefill pass, which
// reduces each (row, key) dot over the head, pays a horizontal sum for every 4 FMAs. Here keys lie
// across the vector lanes, as in the AVX-512 table's kernel (kernels_avx512_encoder.cpp, which
// explains the layout): scores for 6 query rows and 16 keys at a time, each head value a broadcast
// and 2 FMAs; weighted values for 2 rows and up to 4 vectors of the head per pass, each key's
// probabilities broadcast. The softmax runs online over tiles of 256 keys with the table's
// exponential (exp_shifted), so the two kernels agree with the tiled pass to rounding.
#include "kernels_avx2_encoder.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace loom::cpu {
namespace {

constexpr int64_t kTileKeys = 256;
constexpr int kScoreRows = 6;       // query rows per register block of the scores: 12 accumulators
constexpr int kWeighRows = 2;       // and of the weighted values: 2 x 4 accumulators
constexpr int kWeighVectors = 4;    // head vectors per pass of the weighted values
constexpr int64_t kWeighKeys = 64;  // keys per slice of the weighted values (in L1 for all the block's rows)
constexpr int64_t kMaxHead = 128;

// scores[r][j] = q_r . k_j for R rows and keys [0, width) (a multiple of 16; the transposed keys,
// blocks of 32 keys by head_dim, are zero-padded past the tile's keys), and each row's largest score
// over keys [0, valid), taken while the sums are in registers.
template <int R>
inline void score_rows(const float* const* q, const float* kt, int64_t head_dim, int64_t width, int64_t valid, float* const* scores,
                       float* row_max) {
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 mx[R];
  for (int r = 0; r < R; r++) mx[r] = minus_inf;
  for (int64_t j = 0; j < width; j += 16) {
    __m256 acc[R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const float* block = kt + (j / 32) * 32 * head_dim + j % 32;
    for (int64_t d = 0; d < head_dim; d++) {
      const __m256 k0 = _mm256_loadu_ps(block + d * 32), k1 = _mm256_loadu_ps(block + d * 32 + 8);
      for (int r = 0; r < R; r++) {
        const __m256 b = _mm256_broadcast_ss(q[r] + d);
        acc[r][0] = _mm256_fmadd_ps(k0, b, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(k1, b, acc[r][1]);
      }
    }
    for (int r = 0; r < R; r++) {
      _mm256_storeu_ps(scores[r] + j, acc[r][0]);
      _mm256_storeu_ps(scores[r] + j + 8, acc[r][1]);
    }
    if (j + 16 <= valid) {
      for (int r = 0; r < R; r++) mx[r] = _mm256_max_ps(mx[r], _mm256_max_ps(acc[r][0], acc[r][1]));
    } else {  // the tile's last keys: lanes from `valid` on are padding
      const __m256 left = _mm256_set1_ps(float(valid - j));
      const __m256 keep0 = _mm256_cmp_ps(lane, left, _CMP_LT_OQ);
      const __m256 keep1 = _mm256_cmp_ps(_mm256_add_ps(lane, _mm256_set1_ps(8.0f)), left, _CMP_LT_OQ);
      for (int r = 0; r < R; r++)
        mx[r] = _mm256_max_ps(mx[r], _mm256_max_ps(_mm256_blendv_ps(minus_inf, acc[r][0], keep0), _mm256_blendv_ps(minus_inf, acc[r][1], keep1)));
    }
  }
  for (int r = 0; r < R; r++) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx[r]), _mm256_extractf128_ps(mx[r], 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    row_max[r] = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
}

template <int R = kScoreRows>
void score_dispatch(int rows, const float* const* q, const float* kt, int64_t head_dim, int64_t width, int64_t valid, float* const* scores,
                    float* row_max) {
  if constexpr (R > 0) {
    if (rows == R) return score_rows<R>(q, kt, head_dim, width, valid, scores, row_max);
    return score_dispatch<R - 1>(rows, q, kt, head_dim, width, valid, scores, row_max);
  }
}

// acc[r][0, 8C) += sum_j p[r][j] * v_j[0, 8C) over keys [0, n), for R rows.
template <int R, int C>
inline void weigh_rows(const float* const* p, const float* v, int64_t v_stride, int64_t n, float* const* acc) {
  __m256 a[R][C];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) a[r][c] = _mm256_loadu_ps(acc[r] + 8 * c);
  for (int64_t j = 0; j < n; j++) {
    __m256 b[R];
    for (int r = 0; r < R; r++) b[r] = _mm256_broadcast_ss(p[r] + j);
    for (int c = 0; c < C; c++) {
      const __m256 vv = _mm256_loadu_ps(v + j * v_stride + 8 * c);
      for (int r = 0; r < R; r++) a[r][c] = _mm256_fmadd_ps(vv, b[r], a[r][c]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) _mm256_storeu_ps(acc[r] + 8 * c, a[r][c]);
}

template <int R>
void weigh_dispatch(int vectors, const float* const* p, const float* v, int64_t v_stride, int64_t n, float* const* acc) {
  switch (vectors) {
    case 1: return weigh_rows<R, 1>(p, v, v_stride, n, acc);
    case 2: return weigh_rows<R, 2>(p, v, v_stride, n, acc);
    case 3: return weigh_rows<R, 3>(p, v, v_stride, n, acc);
    case 4: return weigh_rows<R, 4>(p, v, v_stride, n, acc);
    default: return;
  }
}

// Per tile of 256 keys and block of 6 query rows: the scores (6 KiB, in L1), their online softmax and
// the weighted values, before the next block. The queries are scaled once up front.
bool encoder_attention(const EncoderAttentionBlock& b, float (*exp_shifted)(float* x, int64_t n, float shift)) {
  if (b.head_dim < 8 || b.head_dim % 8 != 0 || b.head_dim > kMaxHead || exp_shifted == nullptr) return false;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  static thread_local std::vector<float> queries, scores, acc, row_max, row_sum;
  const int64_t head_dim = b.head_dim;
  queries.resize(size_t(b.n_q * head_dim));
  for (int64_t i = 0; i < b.n_q; i++)
    for (int64_t d = 0; d < head_dim; d++) queries[size_t(i * head_dim + d)] = b.q[i * b.q_stride + d] * b.scale;
  scores.resize(size_t(kScoreRows * kTileKeys));
  acc.assign(size_t(b.n_q * head_dim), 0.0f);
  row_max.assign(size_t(b.n_q), kMinusInf);
  row_sum.assign(size_t(b.n_q), 0.0f);
  const int64_t last_key = b.causal ? std::min(b.n_keys, b.q_pos0 + b.n_q) : b.n_keys;  // keys any row sees
  for (int64_t k0 = 0; k0 < last_key; k0 += kTileKeys) {
    const int64_t width = std::min(kTileKeys, last_key - k0), padded = (width + 15) / 16 * 16;
    const float* kt = b.kt + k0 * head_dim;  // k0 is a multiple of 32: whole blocks
    const float* v = b.v + k0 * b.v_stride;
    for (int64_t i0 = 0; i0 < b.n_q; i0 += kScoreRows) {
      const int rows = int(std::min<int64_t>(kScoreRows, b.n_q - i0));
      const float* q[kScoreRows];
      float* s[kScoreRows];
      float tile_max[kScoreRows];
      for (int r = 0; r < rows; r++) q[r] = queries.data() + (i0 + r) * head_dim, s[r] = scores.data() + r * kTileKeys;
      score_dispatch(rows, q, kt, head_dim, padded, width, s, tile_max);
      // Online softmax: keys a row does not see (the padding, a causal row's later keys) become -inf,
      // which the exponential turns into 0; a causal row's maximum is taken again over the keys it sees.
      for (int r = 0; r < rows; r++) {
        const int64_t i = i0 + r;
        const int64_t visible = b.causal ? std::clamp<int64_t>(b.q_pos0 + i + 1 - k0, 0, width) : width;
        std::fill(s[r] + visible, s[r] + padded, kMinusInf);
        if (visible < width) tile_max[r] = visible > 0 ? *std::max_element(s[r], s[r] + visible) : kMinusInf;
        const float m = std::max(row_max[size_t(i)], tile_max[r]);
        if (m == kMinusInf) {
          std::fill(s[r], s[r] + padded, 0.0f);
          continue;
        }
        const float rescale = std::exp(row_max[size_t(i)] - m);
        row_sum[size_t(i)] = row_sum[size_t(i)] * rescale + exp_shifted(s[r], padded, m);
        row_max[size_t(i)] = m;
        if (rescale != 1.0f) {
          float* a = acc.data() + i * head_dim;
          for (int64_t d = 0; d < head_dim; d += 8) _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), _mm256_set1_ps(rescale)));
        }
      }
      // The tile's values in slices of kWeighKeys keys, each weighed for all the block's rows before
      // the next, in passes of up to 4 head vectors.
      for (int64_t j0 = 0; j0 < width; j0 += kWeighKeys) {
        const int64_t keys = std::min(kWeighKeys, width - j0);
        for (int64_t d0 = 0; d0 < head_dim; d0 += 8 * kWeighVectors) {
          const int vectors = int(std::min<int64_t>(kWeighVectors, (head_dim - d0) / 8));
          const float* vj = v + j0 * b.v_stride + d0;
          for (int r0 = 0; r0 < rows; r0 += kWeighRows) {
            const float* p[kWeighRows];
            float* a[kWeighRows];
            const int n = std::min(kWeighRows, rows - r0);
            for (int r = 0; r < n; r++) p[r] = s[r0 + r] + j0, a[r] = acc.data() + (i0 + r0 + r) * head_dim + d0;
            if (n == 2) weigh_dispatch<2>(vectors, p, vj, b.v_stride, keys, a);
            else weigh_dispatch<1>(vectors, p, vj, b.v_stride, keys, a);
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < b.n_q; i++) {
    const float inv = row_sum[size_t(i)] > 0.0f ? 1.0f / row_sum[size_t(i)] : 0.0f;
    float* out = b.out + i * b.out_stride;
    for (int64_t d = 0; d < head_dim; d++) out[d] = acc[size_t(i * head_dim + d)] * inv;
  }
  return true;
}

}  // namespace

decltype(Kernels::encoder_attention) avx2_encoder_attention() { return encoder_attention; }

}  // namespace loom::cpu

#else

namespace loom::cpu {
decltype(Kernels::encoder_attention) avx2_encoder_attention() { return nullptr; }
}  // namespace loom::cpu

#endif
