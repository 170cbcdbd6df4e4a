// Batched Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL matmuls with the tokens across the lanes of a
// register: 16 in a 512-bit one, or 8 in a 256-bit one for batches of a few (the panel layout of
// kernels.h).
//
// A panel block (32 values of every token) is eight vectors: vector k holds values 4k..4k+3 of token
// t in int32 lane t. A weight row's block becomes 32 unsigned bytes u = w + offset; each group of
// four is broadcast and vpdpbusd adds sum(u * x) over those four values to every token's lane at
// once. Eight such steps finish the block's sums, already one per lane: no horizontal reduction,
// and one conversion, one scale product and one FMA per (row, block) for all sixteen tokens.
//
// The offset comes out exactly, as in the row kernels: sum((u - offset) * x) = sum(u * x) - offset *
// sum(x), and the panel carries -offset * sum(x) per token and block as the sums' starting value.
//
// Per (row, block) for 16 tokens (512 multiply-adds): 8 vpdpbusd, 8 broadcast loads, the unpack of
// one block, 4 scale and accumulate operations. The tile kernel spends about 23 vector operations on
// a 4-token block pair (256 multiply-adds). Rows go four at a time so the eight activation vectors
// are loaded once for four rows, and the four rows' sums are eight independent dependency chains,
// which cover vpdpbusd's latency.
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

namespace loom::cpu {
namespace {

using avx512::h2f;

// One panel block of L tokens: 8 vectors of values (4L bytes each), then L int32 starting sums,
// L float scales, and L float block sums (scale x sum of the values, for the formats with a min).
template <int L>
constexpr size_t kValuesBytes = 8 * 4 * L;
template <int L>
constexpr size_t kBlockBytes = kValuesBytes<L> + 12 * L;

template <int L>
size_t panel_bytes(int64_t n) {
  return size_t(n / 32) * kBlockBytes<L>;
}

template <int L, int kOffset>
void quantize_panel(const Kernels&, const float* const* rows, int n_valid, int64_t n, void* panel) {
  auto* out = static_cast<uint8_t*>(panel);
  std::memset(out, 0, panel_bytes<L>(n));
  for (int64_t b = 0; b < n / 32; b++) {
    uint8_t* block = out + size_t(b) * kBlockBytes<L>;
    auto* start = reinterpret_cast<int32_t*>(block + kValuesBytes<L>);
    auto* scale = reinterpret_cast<float*>(block + kValuesBytes<L> + 4 * L);
    auto* scaled_sum = reinterpret_cast<float*>(block + kValuesBytes<L> + 8 * L);
    for (int t = 0; t < n_valid; t++) {
      const avx512::QuantizedBlock q = avx512::quantize_block(rows[t] + 32 * b);
      alignas(32) int8_t values[32];
      _mm_store_si128(reinterpret_cast<__m128i*>(values), q.half[0]);
      _mm_store_si128(reinterpret_cast<__m128i*>(values + 16), q.half[1]);
      int sum = 0;
      for (int i = 0; i < 32; i++) sum += values[i];
      for (int k = 0; k < 8; k++) std::memcpy(block + 4 * L * k + 4 * t, values + 4 * k, 4);
      start[t] = -kOffset * sum;
      scale[t] = q.scale;
      scaled_sum[t] = q.scale * float(sum);
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
  static constexpr bool kFromBlock = false;
  static __m256i unsigned_values(const Block& w) { return nibbles(w.qs); }
};
template <typename B, int kOffsetValue>
struct FiveBitFormat {
  using Block = B;
  static constexpr int kOffset = kOffsetValue;
  static constexpr bool kFromBlock = false;
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
  static constexpr bool kFromBlock = false;
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
  static constexpr bool kFromBlock = true;  // see panel_rows
  static __m256i unsigned_values(const Block& w) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs)), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

// R weight rows x the panel's L tokens; out[r * L + t]. prefetch/prefetch_bytes: the next rows,
// fetched a few lines per block while these compute (a batch of 16 streams its weights from DRAM at
// the pace of this loop).
template <int L, typename F, int R>
void panel_rows(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* panel, float* out, const uint8_t* prefetch,
                size_t prefetch_bytes) {
  using V = avx512::Lanes<L>;
  using Block = typename F::Block;
  const int64_t nb = n / 32;
  const Block* rows[R];
  for (int r = 0; r < R; r++) rows[r] = reinterpret_cast<const Block*>(w + size_t(r) * w_stride);
  typename V::F acc[R];
  for (int r = 0; r < R; r++) acc[r] = V::zero_floats();
  const size_t lines_per_block = nb > 0 ? (prefetch_bytes / 64 + size_t(nb)) / size_t(nb) : 0;
  size_t prefetched = 0;
  // Each group of four unsigned weights is a broadcast load (a load port, not the shuffle port
  // vpdpbusd shares). Q8_0 broadcasts its bytes straight from the block and flips their sign bits in
  // the register; the nibble formats unpack to memory, block b + 1 while block b computes, since a
  // load right after the store it reads stalls on store forwarding (unpacking just before the loads,
  // Q8_0 as well, ran batch 16 at 401-434 tok/s and pp512 at 785-803; now 508-529 and 908-925).
  alignas(32) uint8_t unpacked[2][R][32];
  auto unpack = [&](int64_t b) {
    for (int r = 0; r < R; r++) _mm256_store_si256(reinterpret_cast<__m256i*>(unpacked[b & 1][r]), F::unsigned_values(rows[r][b]));
  };
  static constexpr uint8_t kSignBits[4] = {0x80, 0x80, 0x80, 0x80};
  const typename V::I flip = V::broadcast(kSignBits);
  if constexpr (!F::kFromBlock) unpack(0);
  for (int64_t b = 0; b < nb; b++) {
    for (size_t l = 0; l < lines_per_block && prefetched < prefetch_bytes; l++, prefetched += 64)
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + prefetched), _MM_HINT_T0);
    const uint8_t* block = panel + size_t(b) * kBlockBytes<L>;
    typename V::I x[8];
    for (int k = 0; k < 8; k++) x[k] = V::load(block + 4 * L * k);
    const typename V::I start = V::load(block + kValuesBytes<L>);
    const typename V::F x_scale = V::load_floats(block + kValuesBytes<L> + 4 * L);
    [[maybe_unused]] const typename V::F x_scaled_sum = V::load_floats(block + kValuesBytes<L> + 8 * L);
    if constexpr (!F::kFromBlock)
      if (b + 1 < nb) unpack(b + 1);
    auto group = [&](int r, int k) {
      if constexpr (F::kFromBlock) return V::bxor(V::broadcast(reinterpret_cast<const uint8_t*>(rows[r][b].qs) + 4 * k), flip);
      else return V::broadcast(unpacked[b & 1][r] + 4 * k);
    };
    for (int r = 0; r < R; r++) {
      // Two chains per row (even and odd groups), eight in flight over four rows.
      typename V::I even = start, odd = V::zero();
      for (int k = 0; k < 8; k += 2) {
        even = V::dot(even, group(r, k), x[k]);
        odd = V::dot(odd, group(r, k + 1), x[k + 1]);
      }
      const typename V::F scale = V::mul(x_scale, V::splat(h2f(rows[r][b].d)));
      acc[r] = V::fmadd(V::to_floats(V::add(even, odd)), scale, acc[r]);
      if constexpr (kHasMin<F>) acc[r] = V::fmadd(x_scaled_sum, V::splat(F::min(rows[r][b])), acc[r]);
    }
  }
  for (int r = 0; r < R; r++) V::store(out + L * r, acc[r]);
}

template <int L, typename F>
void panel_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* panel, float* out) {
  constexpr int64_t kGroup = 4;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* x = static_cast<const uint8_t*>(panel);
  int64_t r = 0;
  for (; r + kGroup <= n_rows; r += kGroup) {
    const int64_t ahead = std::min<int64_t>(kGroup, n_rows - (r + kGroup));
    panel_rows<L, F, kGroup>(n, p + size_t(r) * w_stride, w_stride, x, out + L * r, p + size_t(r + kGroup) * w_stride,
                             size_t(ahead) * w_stride);
  }
  for (; r < n_rows; r++) panel_rows<L, F, 1>(n, p + size_t(r) * w_stride, w_stride, x, out + L * r, nullptr, 0);
}

template <typename F>
PanelSet panels() {
  return {{16, quantize_panel<16, F::kOffset>, panel_dot<16, F>, panel_bytes<16>},
          {8, quantize_panel<8, F::kOffset>, panel_dot<8, F>, panel_bytes<8>}};
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
  // 9% (and a mixture-of-experts batch of 16, about 4 rows per expert, by 5%).
  k.panel_min_tokens = 3;
}

}  // namespace loom::cpu

#else  // not built for AVX-512

namespace loom::cpu {
void add_avx512_panels(Kernels&) {}
}  // namespace loom::cpu

#endif
