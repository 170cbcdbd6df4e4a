// The grouped token panels' shared pieces (include only from files compiled with -mavx512*): panels
// of L = 8 or 4 tokens in 512-bit registers, G = 16 / L int32 lanes per token, and the integer
// transpose-add that leaves four weight rows' (row, token) sums in one vector (4 tokens) or two (8).
// See kernels_avx512_panel.cpp.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace loom::cpu::avx512 {

// The 4G weight bytes at `bytes`, repeated for every token (one broadcast load).
template <int L>
inline __m512i broadcast_weights(const uint8_t* bytes) {
  static_assert(L == 8 || L == 4, "grouped panels hold 8 or 4 tokens");
  if constexpr (L == 8) {
    int64_t groups;
    std::memcpy(&groups, bytes, 8);
    return _mm512_set1_epi64(groups);
  } else {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  }
}

// One weight row's lane sums over kVectors value vectors (4G bytes of w per vector) from `start`:
// one chain for two vectors, else two (even and odd vectors) so rows interleave without waiting on
// vpdpbusd's latency.
template <int L, int kVectors>
inline __m512i row_lane_sums(__m512i start, const uint8_t* w, const __m512i* x) {
  constexpr int kBytes = 64 / L;
  if constexpr (kVectors == 2) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, broadcast_weights<L>(w), x[0]), broadcast_weights<L>(w + kBytes), x[1]);
  } else {
    __m512i even = start, odd = _mm512_setzero_si512();
    for (int k = 0; k < kVectors; k += 2) {
      even = _mm512_dpbusd_epi32(even, broadcast_weights<L>(w + kBytes * k), x[k]);
      odd = _mm512_dpbusd_epi32(odd, broadcast_weights<L>(w + kBytes * (k + 1)), x[k + 1]);
    }
    return _mm512_add_epi32(even, odd);
  }
}

// Adds each token's four lanes of four rows' sums s[0..3] (4 tokens): lane 4t + r of the result.
inline __m512i add_lanes_4(const __m512i* s) {
  const __m512i p = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
  const __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(p, q), _mm512_unpackhi_epi64(p, q));
}

// Adds each token's two lanes of two rows' sums a, b (8 tokens): lane 4c + 2ρ + τ of the result
// holds token 2c + τ of row ρ (a: 0, b: 1).
inline __m512i add_lanes_2(__m512i a, __m512i b) {
  const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
  return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
}

// Four rows' sums s[0..3] in the reduced layout: one vector for 4 tokens, two for 8.
template <int L>
inline void add_lanes(const __m512i* s, __m512i* reduced) {
  if constexpr (L == 4) reduced[0] = add_lanes_4(s);
  else reduced[0] = add_lanes_2(s[0], s[1]), reduced[1] = add_lanes_2(s[2], s[3]);
}

// Where token t's sums sit in the reduced layout (16 tokens: lane t, no reduction; 4 tokens: lanes
// 4t + r for rows r; 8 tokens: lanes 4c + 2ρ + τ for token 2c + τ and row ρ of each pair). Returns
// how many lanes (of one vector) hold token t.
template <int L>
inline int token_lanes(int t, int* lanes) {
  if constexpr (L == 16) {
    lanes[0] = t;
    return 1;
  } else if constexpr (L == 4) {
    for (int r = 0; r < 4; r++) lanes[r] = 4 * t + r;
    return 4;
  } else {
    lanes[0] = 4 * (t / 2) + t % 2, lanes[1] = lanes[0] + 2;
    return 2;
  }
}

// Four rows' float values v[4] in the reduced layout's 128-bit pattern(s), for a broadcast: 4 tokens
// [v0 v1 v2 v3]; 8 tokens [v0 v0 v1 v1] and [v2 v2 v3 v3].
template <int L>
inline void row_pattern(__m128 v, float* out) {
  if constexpr (L == 8) {
    _mm_store_ps(out, _mm_unpacklo_ps(v, v));
    _mm_store_ps(out + 4, _mm_unpackhi_ps(v, v));
  } else {
    _mm_store_ps(out, v);
  }
}

// The reduced accumulators to out[r * L + t] for four rows.
template <int L>
inline void store_rows(const __m512* acc, float* out) {
  if constexpr (L == 4) {
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, acc[0]));
  } else {
    // out index ρ * 8 + 2c + τ within each pair of rows, from lane 4c + 2ρ + τ.
    const __m512i order = _mm512_set_epi32(15, 14, 11, 10, 7, 6, 3, 2, 13, 12, 9, 8, 5, 4, 1, 0);
    for (int i = 0; i < 2; i++) _mm512_storeu_ps(out + 16 * i, _mm512_permutexvar_ps(order, acc[i]));
  }
}

}  // namespace loom::cpu::avx512
