// Batched Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL matmuls with the tokens across the lanes of a
// 512-bit register: panels of 16, 8 or 4 tokens (the panel layout of kernels.h).
//
// A weight row's block becomes 32 unsigned bytes u = w + offset, and vpdpbusd multiplies a group of
// them, broadcast, with the same values of every token of the panel. The offset comes out exactly,
// as in the row kernels: sum((u - offset) * x) = sum(u * x) - offset * sum(x), and the panel carries
// -offset * sum(x) per block as the sums' starting value.
//
// 16 tokens: one int32 lane per token; a block is eight vectors (vector k: values 4k..4k+3 of
// token t in lane t), each weight group four bytes. The lanes end the block holding its sums, and one
// conversion, one scale product and one FMA per (row, block) serve all sixteen tokens.
//
// 8 and 4 tokens (a mixture-of-experts expert's share of a batch): G = 16 / L lanes per token, so a
// vector holds 4G values of each token (lane tG + g: values 4Gk + 4g .. 4Gk + 4g + 3), a weight group
// is 4G bytes and a block takes 8 / G vpdpbusd instead of 8, every lane busy (16-lane panels of four
// tokens left three quarters of each idle). A token's G partial sums are then added across four
// weight rows at once, in integers (exact), by a transpose-add: for 4 tokens one vector of 16
// (row, token) block sums, for 8 two. The conversion, scale and FMA of each (row, token, block)
// then do exactly what the 16-token kernel does, so a token's result is the same to the bit in a
// panel of any width, which keeps a sequence's logits independent of the batch it runs in (the
// activations are rounded to int8 blocks downstream, where a last-bit difference can move a value
// by a whole step).
//
// Rows go four at a time so the activation vectors are loaded once for four rows, and the rows' sums
// are independent dependency chains, which cover vpdpbusd's latency.
#include "kernels_avx512_panel.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__F16C__)

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_tensor.h"
#include "ggml_blocks.h"
#include "kernels_avx512_common.h"
#include "kernels_avx512_grouped.h"

namespace loom::cpu {
namespace {

using avx512::h2f;

// The lanes of a panel of L tokens: G per token, each weight group 4G bytes, 8 / G vectors per block.
template <int L>
struct Shape {
  static_assert(L == 16 || L == 8 || L == 4, "panels hold 16, 8 or 4 tokens");
  static constexpr int kGroups = 16 / L;
  static constexpr int kBytes = 4 * kGroups;
  static constexpr int kVectors = 8 / kGroups;
};

// One panel block of L tokens: the value vectors, then per lane the int32 starting sums (-offset x
// the lane's share of the values' sum); then, in token_lanes' layout, the float scales and the float
// scaled sums (scale x the sum of the block's values, for the formats with a min).
template <int L>
struct BlockLayout {
  static constexpr size_t kStartsAt = 64 * Shape<L>::kVectors;
  static constexpr size_t kScalesAt = kStartsAt + 64;
  static constexpr size_t kScaledSumsAt = kScalesAt + 64;
  static constexpr size_t kBlockBytes = kScaledSumsAt + 64;
};

template <int L>
size_t panel_bytes(int64_t n) {
  return size_t(n / 32) * BlockLayout<L>::kBlockBytes;
}

template <int L, int kOffset>
void quantize_panel(const Kernels&, const float* const* rows, int n_valid, int64_t n, void* panel) {
  using P = BlockLayout<L>;
  using S = Shape<L>;
  auto* out = static_cast<uint8_t*>(panel);
  std::memset(out, 0, panel_bytes<L>(n));
  for (int64_t b = 0; b < n / 32; b++) {
    uint8_t* block = out + size_t(b) * P::kBlockBytes;
    auto* start = reinterpret_cast<int32_t*>(block + P::kStartsAt);
    auto* scale = reinterpret_cast<float*>(block + P::kScalesAt);
    auto* scaled_sum = reinterpret_cast<float*>(block + P::kScaledSumsAt);
    for (int t = 0; t < n_valid; t++) {
      const avx512::QuantizedBlock q = avx512::quantize_block(rows[t] + 32 * b);
      alignas(32) int8_t values[32];
      _mm_store_si128(reinterpret_cast<__m128i*>(values), q.half[0]);
      _mm_store_si128(reinterpret_cast<__m128i*>(values + 16), q.half[1]);
      for (int k = 0; k < S::kVectors; k++) std::memcpy(block + 64 * k + S::kBytes * t, values + S::kBytes * k, S::kBytes);
      int total = 0;
      for (int g = 0; g < S::kGroups; g++) {
        int share = 0;
        for (int k = 0; k < S::kVectors; k++)
          for (int i = 0; i < 4; i++) share += values[S::kBytes * k + 4 * g + i];
        start[S::kGroups * t + g] = -kOffset * share;
        total += share;
      }
      int lanes[4];
      for (int i = 0, n_lanes = avx512::token_lanes<L>(t, lanes); i < n_lanes; i++) {
        scale[lanes[i]] = q.scale;
        scaled_sum[lanes[i]] = q.scale * float(total);
      }
    }
  }
}

// Each format gives a block's 32 weights as unsigned bytes u in element order and its scale d: the
// weights are d x (u - kOffset), plus min(block) for the formats that have one (Q4_1, Q5_1).
// Q4_0/Q5_0 nibbles in element order: byte i holds element i in its low nibble, i + 16 in its high.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// The 4-bit formats (Q4_0, Q4_1) and the 5-bit ones (Q5_0, Q5_1: bit j of qh tops element j).
template <typename B, int kOffsetValue>
struct FourBitFormat {
  using Block = B;
  static constexpr int kOffset = kOffsetValue;
  static __m256i unsigned_values(const Block& w) { return nibbles(w.qs); }
};
template <typename B, int kOffsetValue>
struct FiveBitFormat {
  using Block = B;
  static constexpr int kOffset = kOffsetValue;
  static __m256i unsigned_values(const Block& w) {
    uint32_t high;
    std::memcpy(&high, w.qh, 4);
    const __m256i low = nibbles(w.qs);
    return _mm256_mask_add_epi8(low, _cvtu32_mask32(high), low, _mm256_set1_epi8(0x10));
  }
};

using Q4_0Format = FourBitFormat<loom_block_q4_0, 8>;
using Q5_0Format = FiveBitFormat<loom_block_q5_0, 16>;
struct Q4_1Format : FourBitFormat<BlockQ4_1, 0> {
  static float min(const Block& w) { return h2f(w.m); }
};
struct Q5_1Format : FiveBitFormat<BlockQ5_1, 0> {
  static float min(const Block& w) { return h2f(w.m); }
};

// IQ4_NL: each nibble picks one of sixteen signed levels; the table holds them plus 128.
struct IQ4_NLFormat {
  using Block = BlockIQ4NL;
  static constexpr int kOffset = 128;
  static __m256i unsigned_values(const Block& w) {
    const __m256i table = _mm256_broadcastsi128_si256(avx512::iq4_level_table());
    return _mm256_shuffle_epi8(table, nibbles(w.qs));
  }
};

template <typename F>
constexpr bool kHasMin = requires(const typename F::Block& b) { F::min(b); };

struct Q8_0Format {
  using Block = loom_block_q8_0;
  static constexpr int kOffset = 128;  // flipping the sign bit adds 128
  static __m256i unsigned_values(const Block& w) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs)), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

// The grouped kernel's four weight rows' blocks unpacked to memory for the broadcast loads, block
// b + 1 while block b computes: a load right after the store it reads stalls on store forwarding
// (unpacking just before the loads ran batch 16 at 401-434 tok/s and pp512 at 785-803; then 508-529
// and 908-925). The scales and mins are floats in the reduced layout's 128-bit patterns
// (avx512::row_pattern), broadcast from memory.
template <int L, typename F>
struct UnpackedRows {
  alignas(64) uint8_t values[2][4][32];
  alignas(64) float scale[2][8];
  alignas(64) float min[2][8];
  void unpack(const typename F::Block* const* rows, int64_t b) {
    for (int r = 0; r < 4; r++) _mm256_store_si256(reinterpret_cast<__m256i*>(values[b & 1][r]), F::unsigned_values(rows[r][b]));
    // The four rows' f16 scales (and mins) gathered in a general register and converted at once.
    uint64_t d = 0, m = 0;
    for (int r = 0; r < 4; r++) {
      d |= uint64_t(rows[r][b].d) << (16 * r);
      if constexpr (kHasMin<F>) m |= uint64_t(rows[r][b].m) << (16 * r);
    }
    avx512::row_pattern<L>(_mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(d))), scale[b & 1]);
    if constexpr (kHasMin<F>) avx512::row_pattern<L>(_mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(m))), min[b & 1]);
  }
};

// Prefetches the next rows a few lines per block while these compute (a batch of 16 streams its
// weights from DRAM at the pace of these loops).
struct Prefetcher {
  const uint8_t* next;
  size_t bytes, per_block, done = 0;
  Prefetcher(const uint8_t* p, size_t n, int64_t nb) : next(p), bytes(n), per_block(nb > 0 ? (n / 64 + size_t(nb)) / size_t(nb) : 0) {}
  void step() {
    for (size_t l = 0; l < per_block && done < bytes; l++, done += 64) _mm_prefetch(reinterpret_cast<const char*>(next + done), _MM_HINT_T0);
  }
};

// 16 tokens, one lane each: R weight rows x the panel; out[r * 16 + t]. prefetch/prefetch_bytes: the
// next rows, fetched a few lines per block while these compute. (Written apart from the grouped
// kernel's helpers: through UnpackedRows and Prefetcher the same loop ran 6-10% slower for Q4_0 and
// Q5_0, its general registers spilled.)
template <typename F, int R>
void panel_rows_wide(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* panel, float* out, const uint8_t* prefetch,
                     size_t prefetch_bytes) {
  using V = avx512::Lanes<16>;
  using P = BlockLayout<16>;
  using Block = typename F::Block;
  const int64_t nb = n / 32;
  const Block* rows[R];
  for (int r = 0; r < R; r++) rows[r] = reinterpret_cast<const Block*>(w + size_t(r) * w_stride);
  __m512 acc[R];
  for (int r = 0; r < R; r++) acc[r] = V::zero_floats();
  const size_t lines_per_block = nb > 0 ? (prefetch_bytes / 64 + size_t(nb)) / size_t(nb) : 0;
  size_t prefetched = 0;
  alignas(32) uint8_t unpacked[2][R][32];
  auto unpack = [&](int64_t b) {
    for (int r = 0; r < R; r++) _mm256_store_si256(reinterpret_cast<__m256i*>(unpacked[b & 1][r]), F::unsigned_values(rows[r][b]));
  };
  unpack(0);
  for (int64_t b = 0; b < nb; b++) {
    for (size_t l = 0; l < lines_per_block && prefetched < prefetch_bytes; l++, prefetched += 64)
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + prefetched), _MM_HINT_T0);
    const uint8_t* block = panel + size_t(b) * P::kBlockBytes;
    __m512i x[8];
    for (int k = 0; k < 8; k++) x[k] = V::load(block + 64 * k);
    const __m512i start = V::load(block + P::kStartsAt);
    const __m512 x_scale = V::load_floats(block + P::kScalesAt);
    [[maybe_unused]] const __m512 x_scaled_sum = V::load_floats(block + P::kScaledSumsAt);
    if (b + 1 < nb) unpack(b + 1);
    for (int r = 0; r < R; r++) {
      // Two chains per row (even and odd groups), eight in flight over four rows.
      __m512i even = start, odd = V::zero();
      for (int k = 0; k < 8; k += 2) {
        even = V::dot(even, V::broadcast(unpacked[b & 1][r] + 4 * k), x[k]);
        odd = V::dot(odd, V::broadcast(unpacked[b & 1][r] + 4 * k + 4), x[k + 1]);
      }
      const __m512 scale = V::mul(x_scale, V::splat(h2f(rows[r][b].d)));
      acc[r] = V::fmadd(V::to_floats(V::add(even, odd)), scale, acc[r]);
      if constexpr (kHasMin<F>) acc[r] = V::fmadd(x_scaled_sum, V::splat(F::min(rows[r][b])), acc[r]);
    }
  }
  for (int r = 0; r < R; r++) V::store(out + 16 * r, acc[r]);
}

// 8 or 4 tokens, G lanes each: four weight rows x the panel; out[r * L + t].
template <int L, typename F>
void panel_rows_grouped(int64_t n, const typename F::Block* const* row_pointers, const uint8_t* panel, float* out, Prefetcher prefetch) {
  // Local copies: the unpack's byte stores could otherwise alias the caller's array, and every
  // block would reload the row pointers and the prefetch position from memory.
  const typename F::Block* rows[4] = {row_pointers[0], row_pointers[1], row_pointers[2], row_pointers[3]};
  Prefetcher ahead = prefetch;
  using S = Shape<L>;
  using P = BlockLayout<L>;
  constexpr int kSums = L == 4 ? 1 : 2;  // vectors of (row, token) sums per block
  const int64_t nb = n / 32;
  __m512 acc[kSums];
  for (int i = 0; i < kSums; i++) acc[i] = _mm512_setzero_ps();
  UnpackedRows<L, F> u;
  u.unpack(rows, 0);
  for (int64_t b = 0; b < nb; b++) {
    ahead.step();
    const uint8_t* block = panel + size_t(b) * P::kBlockBytes;
    __m512i x[S::kVectors];
    for (int k = 0; k < S::kVectors; k++) x[k] = _mm512_load_si512(block + 64 * k);
    const __m512i start = _mm512_load_si512(block + P::kStartsAt);
    const __m512 x_scale = _mm512_load_ps(block + P::kScalesAt);
    [[maybe_unused]] const __m512 x_scaled_sum = _mm512_load_ps(block + P::kScaledSumsAt);
    if (b + 1 < nb) u.unpack(rows, b + 1);
    __m512i sums[4];
    for (int r = 0; r < 4; r++) sums[r] = avx512::row_lane_sums<L, S::kVectors>(start, u.values[b & 1][r], x);
    __m512i block_sums[kSums];
    avx512::add_lanes<L>(sums, block_sums);
    for (int i = 0; i < kSums; i++) {
      const __m512 w_scale = _mm512_broadcast_f32x4(_mm_load_ps(u.scale[b & 1] + 4 * i));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums[i]), _mm512_mul_ps(x_scale, w_scale), acc[i]);
      if constexpr (kHasMin<F>) acc[i] = _mm512_fmadd_ps(x_scaled_sum, _mm512_broadcast_f32x4(_mm_load_ps(u.min[b & 1] + 4 * i)), acc[i]);
    }
  }
  avx512::store_rows<L>(acc, out);
}

template <int L, typename F>
void panel_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* panel, float* out) {
  using Block = typename F::Block;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* x = static_cast<const uint8_t*>(panel);
  const int64_t nb = n / 32;
  auto row = [&](int64_t r) { return reinterpret_cast<const Block*>(p + size_t(r) * w_stride); };
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    const Block* rows[4] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
    const Prefetcher next(p + size_t(r + 4) * w_stride, size_t(std::min<int64_t>(4, n_rows - (r + 4))) * w_stride, nb);
    if constexpr (L == 16)
      panel_rows_wide<F, 4>(n, p + size_t(r) * w_stride, w_stride, x, out + L * r, next.next, next.bytes);
    else
      panel_rows_grouped<L, F>(n, rows, x, out + L * r, next);
  }
  if (r == n_rows) return;
  // The last one to three rows: the wide kernel row by row; the grouped ones take four rows, the
  // last repeated, and keep the real ones.
  if constexpr (L == 16) {
    for (; r < n_rows; r++) panel_rows_wide<F, 1>(n, p + size_t(r) * w_stride, w_stride, x, out + L * r, nullptr, 0);
  } else {
    const Block* rows[4];
    for (int i = 0; i < 4; i++) rows[i] = row(std::min<int64_t>(r + i, n_rows - 1));
    alignas(64) float four[4 * L];
    panel_rows_grouped<L, F>(n, rows, x, four, Prefetcher(nullptr, 0, nb));
    std::memcpy(out + L * r, four, sizeof(float) * size_t(L * (n_rows - r)));
  }
}

template <int L, typename F>
PanelKernels panel() {
  return {L, quantize_panel<L, F::kOffset>, panel_dot<L, F>, panel_bytes<L>};
}
template <typename F>
PanelSet panels() {
  return {{panel<4, F>(), panel<8, F>(), panel<16, F>()}};
}

}  // namespace

void add_avx512_panels(Kernels& k) {
  k.q4_0_panels = panels<Q4_0Format>();
  k.q5_0_panels = panels<Q5_0Format>();
  k.q8_0_panels = panels<Q8_0Format>();
  k.q4_1_panels = panels<Q4_1Format>();
  k.q5_1_panels = panels<Q5_1Format>();
  k.iq4_nl_panels = panels<IQ4_NLFormat>();
  add_avx512_kquant_panels(k);
  // Measured on the default model: at 8 tokens panels beat the tiles by 27%, at 4 the narrow ones by
  // 9% (and a mixture-of-experts batch of 16, about 4 rows per expert, by 5%). Against those
  // narrow panels (8 tokens, one lane each, in 256-bit registers), the grouped 4- and 8-token panels
  // took a 1024 x 1024 Q8_0 matmul (loom_cpu_kernel_bench, weights in cache) from 102 to 110 G
  // multiply-adds/s at 4 tokens and from 144 to 152 at 8; at 16, unpacking Q8_0 like the other
  // formats took it from 177 to 200.
  k.panel_min_tokens = 3;
}

}  // namespace loom::cpu

#else  // not built for AVX-512

namespace loom::cpu {
void add_avx512_panels(Kernels&) {}
}  // namespace loom::cpu

#endif
