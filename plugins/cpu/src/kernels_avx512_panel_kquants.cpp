// Batched Q4_K / Q5_K / IQ4_XS / Q6_K matmuls on token panels (see kernels_avx512_panel.cpp for the idea).
//
// A panel super-block holds, for 256 values of its 8 or 16 tokens: 64 value vectors (vector v: values
// 4v..4v+3 of token t in lane t), as the table's BlockQ8K rows round them, so a token's integer sums
// match the one-row kernels'; then each 32-value sub-block's sum as floats (Q4_K's mins); then
// -32 x each 16-value group's sum as int32 (Q6_K's offset, the starting value of that group's sums);
// then the tokens' scales.
//
// Per weight row and super-block the kernels unpack the weights once to unsigned bytes (Q4_K's
// nibbles, Q6_K's six bits) and the sub-block scales to floats, and then run vpdpbusd over the
// tokens: Q4_K folds each 32-value sub-block's sum in with its scale, and its mins in one FMA per
// sub-block against the sums in the panel; Q6_K folds each 16-value group with its scale.
#include "kernels_avx512_panel.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__F16C__)

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ggml_blocks.h"
#include "kernels_avx512_common.h"
#include "kernels_avx512_grouped.h"

namespace loom::cpu {
namespace {

using avx512::h2f;

// Offsets in a super-block of L tokens, one vector = 4L bytes.
template <int L>
struct Layout {
  static constexpr size_t kVector = 4 * L;
  static constexpr size_t kSubBlockSumsAt = 64 * kVector;            // 8 vectors of floats
  static constexpr size_t kGroupStartsAt = kSubBlockSumsAt + 8 * kVector;  // 16 vectors of int32
  static constexpr size_t kScalesAt = kGroupStartsAt + 16 * kVector;  // 1 vector of floats
  static constexpr size_t kSuperBlockBytes = kScalesAt + kVector;
};

template <int L>
size_t panel_bytes(int64_t n) {
  return size_t(n / 256) * Layout<L>::kSuperBlockBytes;
}

template <int L>
void quantize_panel(const Kernels& k, const float* const* rows, int n_valid, int64_t n, void* panel) {
  auto* out = static_cast<uint8_t*>(panel);
  using P = Layout<L>;
  std::memset(out, 0, panel_bytes<L>(n));
  static thread_local std::vector<BlockQ8K> quantized;
  quantized.resize(size_t(n / 256));
  for (int t = 0; t < n_valid; t++) {
    k.quantize_q8k(rows[t], quantized.data(), n);
    for (int64_t b = 0; b < n / 256; b++) {
      const BlockQ8K& q = quantized[size_t(b)];
      uint8_t* block = out + size_t(b) * P::kSuperBlockBytes;
      for (int v = 0; v < 64; v++) std::memcpy(block + P::kVector * v + 4 * t, q.qs + 4 * v, 4);
      auto* sub_sums = reinterpret_cast<float*>(block + P::kSubBlockSumsAt);
      for (int s = 0; s < 8; s++) sub_sums[L * s + t] = float(q.bsums[2 * s] + q.bsums[2 * s + 1]);
      auto* starts = reinterpret_cast<int32_t*>(block + P::kGroupStartsAt);
      for (int g = 0; g < 16; g++) starts[L * g + t] = -32 * q.bsums[g];
      reinterpret_cast<float*>(block + P::kScalesAt)[t] = q.d;
    }
  }
}

// Q4_K's eight 6-bit scales and mins (ggml's get_scale_min_k4).
inline void q4_k_scales(const uint8_t* packed, int s, int& scale, int& min) {
  if (s < 4) {
    scale = packed[s] & 63, min = packed[s + 4] & 63;
  } else {
    scale = (packed[s + 4] & 0xF) | ((packed[s - 4] >> 6) << 4);
    min = (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4);
  }
}

// Q4_K: nibbles of 32-byte chunk c are sub-blocks 2c (low) and 2c + 1 (high), in element order.
struct Q4K {
  using Block = loom_block_q4_k;
  struct Unpacked {
    alignas(32) uint8_t q[256];
    float scale[8], min[8];  // d x scale_s, dmin x min_s
  };
  // d x scale_s and dmin x min_s of Q4_K's packing (Q5_K's too).
  template <typename B>
  static void unpack_scales(const B& w, Unpacked& u) {
    const float d = h2f(w.d), dmin = h2f(w.dmin);
    for (int s = 0; s < 8; s++) {
      int scale, min;
      q4_k_scales(w.scales, s, scale, min);
      u.scale[s] = d * float(scale), u.min[s] = dmin * float(min);
    }
  }
  static void unpack(const Block& w, Unpacked& u) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c), _mm256_and_si256(raw, low4));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4));
    }
    unpack_scales(w, u);
  }
};

// Q5_K: Q4_K's nibbles and scales with a fifth bit from qh: bit 2c of qh[l] tops value l of
// sub-block 2c, bit 2c + 1 value l of sub-block 2c + 1.
struct Q5K {
  using Block = BlockQ5K;
  using Unpacked = Q4K::Unpacked;
  static void unpack(const Block& w, Unpacked& u) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), sixteen = _mm256_set1_epi8(0x10);
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh));
    for (int c = 0; c < 4; c++) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c));
      const __mmask32 low_bit = _mm256_test_epi8_mask(high, _mm256_set1_epi8(static_cast<char>(1 << (2 * c))));
      const __mmask32 high_bit = _mm256_test_epi8_mask(high, _mm256_set1_epi8(static_cast<char>(2 << (2 * c))));
      const __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c), _mm256_mask_add_epi8(lo, low_bit, lo, sixteen));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * c + 32), _mm256_mask_add_epi8(hi, high_bit, hi, sixteen));
    }
    Q4K::unpack_scales(w, u);
  }
};

// IQ4_XS: eight 32-value runs of IQ4_NL levels (plus 128, so unsigned) with 6-bit scales; the 128 is
// taken off as Q4_K's mins are, min_s = 128 x scale_s.
struct IQ4XS {
  using Block = BlockIQ4XS;
  using Unpacked = Q4K::Unpacked;
  static void unpack(const Block& w, Unpacked& u) {
    const __m128i table = avx512::iq4_level_table(), low4 = _mm_set1_epi8(0x0F);
    for (int r = 0; r < 8; r++) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs + 16 * r));
      _mm_store_si128(reinterpret_cast<__m128i*>(u.q + 32 * r), _mm_shuffle_epi8(table, _mm_and_si128(raw, low4)));
      _mm_store_si128(reinterpret_cast<__m128i*>(u.q + 32 * r + 16), _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(raw, 4), low4)));
    }
    const float d = h2f(w.d);
    for (int r = 0; r < 8; r++) u.scale[r] = d * float(iq4_xs_run_scale(w, r)), u.min[r] = 128.0f * u.scale[r];
  }
};

// Q6_K: each 128-value half takes 64 bytes of low nibbles and 32 of two-bit pairs; values l, 32 + l,
// 64 + l, 96 + l (l < 32) come from ql[l] low, ql[32 + l] low, ql[l] high, ql[32 + l] high nibbles
// with qh[l]'s bit pairs 0, 1, 2, 3 on top (ggml's dequantize_row_q6_K).
struct Q6K {
  using Block = loom_block_q6_k;
  struct Unpacked {
    alignas(32) uint8_t q[256];
    float scale[16];  // d x scale_g
  };
  static void unpack(const Block& w, Unpacked& u) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.ql + 64 * h));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.ql + 64 * h + 32));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * h));
      auto* q = reinterpret_cast<__m256i*>(u.q + 128 * h);
      _mm256_store_si256(q + 0, _mm256_or_si256(_mm256_and_si256(a, low4), _mm256_and_si256(_mm256_slli_epi16(hi, 4), bits45)));
      _mm256_store_si256(q + 1, _mm256_or_si256(_mm256_and_si256(b, low4), _mm256_and_si256(_mm256_slli_epi16(hi, 2), bits45)));
      _mm256_store_si256(q + 2, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), _mm256_and_si256(hi, bits45)));
      _mm256_store_si256(q + 3,
                         _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4), _mm256_and_si256(_mm256_srli_epi16(hi, 2), bits45)));
    }
    const float d = h2f(w.d);
    for (int g = 0; g < 16; g++) u.scale[g] = d * float(w.scales[g]);
  }
};

// The sums of one weight row over kVectors value vectors: two chains (even and odd vectors) so
// rows interleave without waiting on vpdpbusd's latency.
template <int L, int kVectors>
inline typename avx512::Lanes<L>::I group_sums(typename avx512::Lanes<L>::I start, const uint8_t* q, const typename avx512::Lanes<L>::I* x) {
  using V = avx512::Lanes<L>;
  typename V::I even = start, odd = V::zero();
  for (int k = 0; k < kVectors; k += 2) {
    even = V::dot(even, V::broadcast(q + 4 * k), x[k]);
    odd = V::dot(odd, V::broadcast(q + 4 * k + 4), x[k + 1]);
  }
  return V::add(even, odd);
}

// Formats of eight 32-value sub-blocks, each with a scale and a min (Q4_K, Q5_K, IQ4_XS).
template <int L, typename F, int R>
void sub_block_rows(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* panel, float* out) {
  using V = avx512::Lanes<L>;
  using P = Layout<L>;
  typename V::F total[R];
  for (int r = 0; r < R; r++) total[r] = V::zero_floats();
  typename F::Unpacked u[R];
  for (int64_t b = 0; b < n / 256; b++) {
    const uint8_t* block = panel + size_t(b) * P::kSuperBlockBytes;
    for (int r = 0; r < R; r++) F::unpack(reinterpret_cast<const typename F::Block*>(w + size_t(r) * w_stride)[b], u[r]);
    typename V::F acc[R];
    for (int r = 0; r < R; r++) acc[r] = V::zero_floats();
    for (int s = 0; s < 8; s++) {
      typename V::I x[8];
      for (int v = 0; v < 8; v++) x[v] = V::load(block + P::kVector * (8 * s + v));
      const typename V::F sub_sum = V::load_floats(block + P::kSubBlockSumsAt + P::kVector * s);
      for (int r = 0; r < R; r++) {
        const typename V::I sums = group_sums<L, 8>(V::zero(), u[r].q + 32 * s, x);
        acc[r] = V::fmadd(V::to_floats(sums), V::splat(u[r].scale[s]), acc[r]);
        acc[r] = V::fnmadd(sub_sum, V::splat(u[r].min[s]), acc[r]);
      }
    }
    const typename V::F x_scale = V::load_floats(block + P::kScalesAt);
    for (int r = 0; r < R; r++) total[r] = V::fmadd(acc[r], x_scale, total[r]);
  }
  for (int r = 0; r < R; r++) V::store(out + L * r, total[r]);
}

template <int L, int R>
void q6_k_rows(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* panel, float* out) {
  using V = avx512::Lanes<L>;
  using P = Layout<L>;
  typename V::F total[R];
  for (int r = 0; r < R; r++) total[r] = V::zero_floats();
  Q6K::Unpacked u[R];
  for (int64_t b = 0; b < n / 256; b++) {
    const uint8_t* block = panel + size_t(b) * P::kSuperBlockBytes;
    for (int r = 0; r < R; r++) Q6K::unpack(reinterpret_cast<const Q6K::Block*>(w + size_t(r) * w_stride)[b], u[r]);
    typename V::F acc[R];
    for (int r = 0; r < R; r++) acc[r] = V::zero_floats();
    for (int g = 0; g < 16; g++) {
      typename V::I x[4];
      for (int v = 0; v < 4; v++) x[v] = V::load(block + P::kVector * (4 * g + v));
      const typename V::I start = V::load(block + P::kGroupStartsAt + P::kVector * g);
      for (int r = 0; r < R; r++) {
        const typename V::I sums = group_sums<L, 4>(start, u[r].q + 16 * g, x);
        acc[r] = V::fmadd(V::to_floats(sums), V::splat(u[r].scale[g]), acc[r]);
      }
    }
    const typename V::F x_scale = V::load_floats(block + P::kScalesAt);
    for (int r = 0; r < R; r++) total[r] = V::fmadd(acc[r], x_scale, total[r]);
  }
  for (int r = 0; r < R; r++) V::store(out + L * r, total[r]);
}

// Rows in groups of four, prefetching the next group's weights while this one computes.
template <int L, void (*Four)(int64_t, const uint8_t*, size_t, const uint8_t*, float*),
          void (*One)(int64_t, const uint8_t*, size_t, const uint8_t*, float*)>
void panel_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* panel, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* x = static_cast<const uint8_t*>(panel);
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    const uint8_t* next = p + size_t(r + 4) * w_stride;
    const size_t ahead = size_t(std::min<int64_t>(4, n_rows - (r + 4))) * w_stride;
    for (size_t off = 0; off < ahead; off += 64) _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T1);
    Four(n, p + size_t(r) * w_stride, w_stride, x, out + L * r);
  }
  for (; r < n_rows; r++) One(n, p + size_t(r) * w_stride, w_stride, x, out + L * r);
}

// Grouped panels of 8 or 4 tokens for the sub-block formats (G = 16 / L lanes per token, every lane
// busy; kernels_avx512_panel.cpp has the idea): a super-block is 64 / G value vectors (vector v:
// values 4Gv + 4g .. 4Gv + 4g + 3 of token t in lane tG + g), then each 32-value sub-block's sum and
// the tokens' scales as floats in the reduced layout (kernels_avx512_grouped.h). Four rows' lane
// sums are added in integers per sub-block, and each (row, token) then takes exactly the one-lane
// kernel's scale, min and super-block FMAs, so a token's result does not depend on the panel width.
template <int L>
struct GroupedLayout {
  static constexpr int kGroups = 16 / L, kBytes = 4 * kGroups;
  static constexpr int kSubBlockVectors = 8 / kGroups;
  static constexpr size_t kSubBlockSumsAt = 64 * 8 * kSubBlockVectors;  // 8 vectors of floats
  static constexpr size_t kScalesAt = kSubBlockSumsAt + 8 * 64;         // 1 vector of floats
  static constexpr size_t kSuperBlockBytes = kScalesAt + 64;
};

template <int L>
size_t grouped_panel_bytes(int64_t n) {
  return size_t(n / 256) * GroupedLayout<L>::kSuperBlockBytes;
}

template <int L>
void quantize_grouped_panel(const Kernels& k, const float* const* rows, int n_valid, int64_t n, void* panel) {
  using P = GroupedLayout<L>;
  auto* out = static_cast<uint8_t*>(panel);
  std::memset(out, 0, grouped_panel_bytes<L>(n));
  static thread_local std::vector<BlockQ8K> quantized;
  quantized.resize(size_t(n / 256));
  for (int t = 0; t < n_valid; t++) {
    k.quantize_q8k(rows[t], quantized.data(), n);
    int lanes[4];
    const int n_lanes = avx512::token_lanes<L>(t, lanes);
    for (int64_t b = 0; b < n / 256; b++) {
      const BlockQ8K& q = quantized[size_t(b)];
      uint8_t* block = out + size_t(b) * P::kSuperBlockBytes;
      for (int v = 0; v < 64 / P::kGroups; v++) std::memcpy(block + 64 * v + P::kBytes * t, q.qs + P::kBytes * v, P::kBytes);
      auto* sub_sums = reinterpret_cast<float*>(block + P::kSubBlockSumsAt);
      auto* scales = reinterpret_cast<float*>(block + P::kScalesAt);
      for (int i = 0; i < n_lanes; i++) {
        for (int sb = 0; sb < 8; sb++) sub_sums[16 * sb + lanes[i]] = float(q.bsums[2 * sb] + q.bsums[2 * sb + 1]);
        scales[lanes[i]] = q.d;
      }
    }
  }
}

// Four weight rows (row[r]) x the panel's L tokens; out[r * L + t].
template <int L, typename F>
void sub_block_rows_grouped(int64_t n, const uint8_t* const* row, const uint8_t* panel, float* out) {
  using P = GroupedLayout<L>;
  constexpr int K = P::kSubBlockVectors, kSums = L == 4 ? 1 : 2;
  __m512 total[kSums];
  for (int i = 0; i < kSums; i++) total[i] = _mm512_setzero_ps();
  typename F::Unpacked u[4];
  alignas(16) float scale_pattern[8][8], min_pattern[8][8];
  for (int64_t b = 0; b < n / 256; b++) {
    const uint8_t* block = panel + size_t(b) * P::kSuperBlockBytes;
    for (int r = 0; r < 4; r++) F::unpack(reinterpret_cast<const typename F::Block*>(row[r])[b], u[r]);
    for (int sb = 0; sb < 8; sb++) {
      avx512::row_pattern<L>(_mm_set_ps(u[3].scale[sb], u[2].scale[sb], u[1].scale[sb], u[0].scale[sb]), scale_pattern[sb]);
      avx512::row_pattern<L>(_mm_set_ps(u[3].min[sb], u[2].min[sb], u[1].min[sb], u[0].min[sb]), min_pattern[sb]);
    }
    __m512 acc[kSums];
    for (int i = 0; i < kSums; i++) acc[i] = _mm512_setzero_ps();
    for (int sb = 0; sb < 8; sb++) {
      __m512i x[K];
      for (int v = 0; v < K; v++) x[v] = _mm512_load_si512(block + 64 * (K * sb + v));
      const __m512 sub_sum = _mm512_load_ps(block + P::kSubBlockSumsAt + 64 * sb);
      __m512i sums[4];
      for (int r = 0; r < 4; r++) sums[r] = avx512::row_lane_sums<L, K>(_mm512_setzero_si512(), u[r].q + 32 * sb, x);
      __m512i reduced[kSums];
      avx512::add_lanes<L>(sums, reduced);
      for (int i = 0; i < kSums; i++) {
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(reduced[i]), _mm512_broadcast_f32x4(_mm_load_ps(scale_pattern[sb] + 4 * i)), acc[i]);
        acc[i] = _mm512_fnmadd_ps(sub_sum, _mm512_broadcast_f32x4(_mm_load_ps(min_pattern[sb] + 4 * i)), acc[i]);
      }
    }
    const __m512 x_scale = _mm512_load_ps(block + P::kScalesAt);
    for (int i = 0; i < kSums; i++) total[i] = _mm512_fmadd_ps(acc[i], x_scale, total[i]);
  }
  avx512::store_rows<L>(total, out);
}

// panel_dot's four-row and one-row steps: a lone row (the last one to three of a chunk) takes a
// group of four copies of itself and keeps the first result.
template <int L, typename F>
void grouped_four(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* panel, float* out) {
  const uint8_t* rows[4] = {w, w + w_stride, w + 2 * w_stride, w + 3 * w_stride};
  sub_block_rows_grouped<L, F>(n, rows, panel, out);
}
template <int L, typename F>
void grouped_one(int64_t n, const uint8_t* w, size_t, const uint8_t* panel, float* out) {
  const uint8_t* rows[4] = {w, w, w, w};
  alignas(64) float four[4 * L];
  sub_block_rows_grouped<L, F>(n, rows, panel, four);
  std::memcpy(out, four, sizeof(float) * L);
}

template <int L, typename F>
PanelKernels grouped_sub_block_panel() {
  return {L, quantize_grouped_panel<L>, panel_dot<L, grouped_four<L, F>, grouped_one<L, F>>, grouped_panel_bytes<L>, 256};
}

template <int L, typename F>
PanelKernels sub_block_panel() {
  return {L, quantize_panel<L>, panel_dot<L, sub_block_rows<L, F, 4>, sub_block_rows<L, F, 1>>, panel_bytes<L>, 256};
}
template <int L>
PanelKernels q6_k_panel() {
  return {L, quantize_panel<L>, panel_dot<L, q6_k_rows<L, 4>, q6_k_rows<L, 1>>, panel_bytes<L>, 256};
}

}  // namespace

void add_avx512_kquant_panels(Kernels& k) {
  // The sub-block formats: grouped 4- and 8-token panels and 16 tokens one lane each. Against 8
  // one-lane tokens in a 256-bit register (loom_cpu_kernel_bench, Q4_K 1024 x 640): 4 tokens 61 ->
  // 81-86 G multiply-adds/s; 8 tokens 0.044-0.045 -> 0.042-0.043 ms in paired runs. Q6_K: 8 and 16,
  // one lane per token (its 16-value groups would need a transpose-add per 16 values).
  k.q4_k_panels = {{grouped_sub_block_panel<4, Q4K>(), grouped_sub_block_panel<8, Q4K>(), sub_block_panel<16, Q4K>()}};
  k.q5_k_panels = {{grouped_sub_block_panel<4, Q5K>(), grouped_sub_block_panel<8, Q5K>(), sub_block_panel<16, Q5K>()}};
  k.iq4_xs_panels = {{grouped_sub_block_panel<4, IQ4XS>(), grouped_sub_block_panel<8, IQ4XS>(), sub_block_panel<16, IQ4XS>()}};
  k.q6_k_panels = {{{}, q6_k_panel<8>(), q6_k_panel<16>()}};
}

}  // namespace loom::cpu

#else  // not built for AVX-512

namespace loom::cpu {
void add_avx512_kquant_panels(Kernels&) {}
}  // namespace loom::cpu

#endif
