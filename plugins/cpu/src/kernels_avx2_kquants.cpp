// AVX2 kernels for Q2_K, Q3_K, Q5_K, IQ4_XS (on BlockQ8K rows), Q4_1, Q5_1, IQ4_NL and MXFP4 (on BlockQ8 rows): one weight row x up to kMaxTile BlockQ8K activation rows, and
// the decode loop over many rows. Each 256-value block is unpacked once per tile; the integer dot
// products are exact, so results differ from the reference only in float summation order and the
// activations' int8 rounding. This file is compiled with -mavx2 -mfma -mf16c.
#include "kernels_avx2_kquants.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include "cpu_tensor.h"
#include "ggml_blocks.h"
#include "kernels_avx2_common.h"
#include "mxfp4_decode.h"

namespace loom::cpu {
namespace {

using namespace avx2;


// Q5_K: Q4_K's layout plus qh, whose byte l holds in bits 2c and 2c + 1 the fifth bits of values
// 64c + l and 64c + 32 + l. The running copy of qh is shifted right by two per 64 values, so bits 0
// and 1 of each byte are always the current pair (vpsrlw moves bits across the bytes of a word, but
// only into bits the masks drop).
template <int NX>
void dot_q5_k_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const BlockQ5K*>(w);
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit0 = _mm256_set1_epi8(0x01), bit1 = _mm256_set1_epi8(0x02);
  __m256 acc[NX];
  float mins[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps(), mins[j] = 0.0f;
  for (int64_t b = 0; b < n / 256; b++) {
    const BlockQ5K& blk = wb[b];
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; s++) get_scale_min_k4(s, blk.scales, &sc[s], &m[s]);
    const float d = h2f(blk.d), dmin = h2f(blk.dmin);
    __m256i sumi[NX];
    for (int j = 0; j < NX; j++) {
      sumi[j] = _mm256_setzero_si256();
      const BlockQ8K& yb = act_row<BlockQ8K>(x, xs, j)[b];
      int summ = 0;
      for (int s = 0; s < 8; s++) summ += m[s] * (yb.bsums[2 * s] + yb.bsums[2 * s + 1]);
      mins[j] += yb.d * dmin * float(summ);
    }
    __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
    for (int c = 0; c < 4; c++, qh = _mm256_srli_epi16(qh, 2)) {  // values 64c..64c+63: sub-blocks 2c, 2c+1
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, low4), _mm256_slli_epi16(_mm256_and_si256(qh, bit0), 4));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low4),
                                         _mm256_slli_epi16(_mm256_and_si256(qh, bit1), 3));
      const __m256i sc_lo = _mm256_set1_epi16(sc[2 * c]), sc_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int j = 0; j < NX; j++) {
        const int8_t* y = act_row<BlockQ8K>(x, xs, j)[b].qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y))), sc_lo);
        const __m256i p_hi =
            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32))), sc_hi);
        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    for (int j = 0; j < NX; j++) acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * act_row<BlockQ8K>(x, xs, j)[b].d), sum_i32(sumi[j]), acc[j]);
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]) - mins[j];
}

// Both 2-bit K-quants store value 128h + 32j + l (l < 32) in bits 2j of qs[32h + l], and give
// each 16 values (sub-block 8h + 2j + l / 16) its own scale, so one 32-byte load and shift yields
// two sub-blocks in activation order. vpmaddubsw (unsigned weight x signed activation) pairs them;
// vpmaddwd with the two sub-blocks' scales, one per 128-bit lane, sums them.
inline __m256i two_scales(int lo, int hi) { return _mm256_set_m128i(_mm_set1_epi16(int16_t(hi)), _mm_set1_epi16(int16_t(lo))); }

// Q2_K: q in 0..3 with a 4-bit scale and a 4-bit min per sub-block; the mins apply through the
// activations' 16-value sums (bsums).
template <int NX>
void dot_q2_k_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const BlockQ2K*>(w);
  const __m256i bits2 = _mm256_set1_epi8(0x03);
  __m256 acc[NX];
  float mins[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps(), mins[j] = 0.0f;
  for (int64_t b = 0; b < n / 256; b++) {
    const BlockQ2K& blk = wb[b];
    const float d = h2f(blk.d), dmin = h2f(blk.dmin);
    __m256i sumi[NX];
    for (int j = 0; j < NX; j++) {
      sumi[j] = _mm256_setzero_si256();
      const BlockQ8K& yb = act_row<BlockQ8K>(x, xs, j)[b];
      int summ = 0;
      for (int k = 0; k < 16; k++) summ += (blk.scales[k] >> 4) * yb.bsums[k];
      mins[j] += yb.d * dmin * float(summ);
    }
    for (int h = 0; h < 2; h++) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * h));
      for (int s = 0; s < 4; s++) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), bits2);
        const int k = 8 * h + 2 * s;
        const __m256i sc = two_scales(blk.scales[k] & 0xF, blk.scales[k + 1] & 0xF);
        for (int j = 0; j < NX; j++) {
          const int8_t* y = act_row<BlockQ8K>(x, xs, j)[b].qs + 128 * h + 32 * s;
          const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y)));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sc));
        }
      }
    }
    for (int j = 0; j < NX; j++) acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * act_row<BlockQ8K>(x, xs, j)[b].d), sum_i32(sumi[j]), acc[j]);
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]) - mins[j];
}

// Q3_K's 16 signed 6-bit scales: low nibbles in bytes 0-7 (sub-blocks 0-7 low, 8-15 high nibble),
// high bit pairs in bytes 8-11 (sub-block k: byte 8 + k % 4, bits 2 (k / 4)).
inline void q3_k_scales(const uint8_t* packed, int* out) {
  for (int k = 0; k < 16; k++) {
    const int low = k < 8 ? packed[k] & 0xF : packed[k - 8] >> 4;
    const int high = (packed[8 + k % 4] >> (2 * (k / 4))) & 3;
    out[k] = (low | (high << 4)) - 32;
  }
}

// Q3_K: q = (2 low bits) - 4 unless the value's hmask bit is set. vpmaddubsw takes u = q + 4 =
// low | hbit << 2 (0..7); the -4 comes back through the activations' 16-value sums.
template <int NX>
void dot_q3_k_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const BlockQ3K*>(w);
  const __m256i bits2 = _mm256_set1_epi8(0x03), bit0 = _mm256_set1_epi8(0x01);
  __m256 acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; b++) {
    const BlockQ3K& blk = wb[b];
    int sc[16];
    q3_k_scales(blk.scales, sc);
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
    __m256i sumi[NX];
    int offset[NX];  // 4 * sum over sub-blocks of scale * activation sum
    for (int j = 0; j < NX; j++) {
      sumi[j] = _mm256_setzero_si256();
      const BlockQ8K& yb = act_row<BlockQ8K>(x, xs, j)[b];
      int o = 0;
      for (int k = 0; k < 16; k++) o += sc[k] * yb.bsums[k];
      offset[j] = 4 * o;
    }
    for (int h = 0; h < 2; h++) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * h));
      for (int s = 0; s < 4; s++) {
        // Shifting 16-bit lanes moves bits across the two bytes of a lane, but only into bits the
        // masks drop (shifts < 8).
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), bits2);
        const __m256i hbit = _mm256_and_si256(_mm256_srli_epi16(hmask, 4 * h + s), bit0);
        const __m256i u = _mm256_or_si256(low, _mm256_slli_epi16(hbit, 2));
        const int k = 8 * h + 2 * s;
        const __m256i scv = two_scales(sc[k], sc[k + 1]);
        for (int j = 0; j < NX; j++) {
          const int8_t* y = act_row<BlockQ8K>(x, xs, j)[b].qs + 128 * h + 32 * s;
          const __m256i p = _mm256_maddubs_epi16(u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y)));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, scv));
        }
      }
    }
    for (int j = 0; j < NX; j++) {
      const BlockQ8K& yb = act_row<BlockQ8K>(x, xs, j)[b];
      const __m256i total = _mm256_sub_epi32(sumi[j], _mm256_setr_epi32(offset[j], 0, 0, 0, 0, 0, 0, 0));
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(blk.d) * yb.d), sum_i32(total), acc[j]);
    }
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]);
}

// IQ4_XS: each nibble indexes one of 16 signed levels (vpshufb from a table in both 128-bit lanes).
// vpmaddubsw wants one unsigned operand, so it takes |level| and the activation with the level's
// sign (vpsignb). Bytes 32c..32c+15 hold values 64c + l (low nibbles) and 64c + 16 + l (high);
// bytes 32c+16..32c+31 values 64c + 32 + l and 64c + 48 + l: two lane permutes put each sub-block's
// 32 values in activation order.
template <int NX>
void dot_iq4_xs_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const BlockIQ4XS*>(w);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels)));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; b++) {
    const BlockIQ4XS& blk = wb[b];
    const float d = h2f(blk.d);
    __m256i sumi[NX];
    for (int j = 0; j < NX; j++) sumi[j] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
      const __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
      const __m256i first = _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(lo, hi, 0x20));   // sub-block 2c
      const __m256i second = _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(lo, hi, 0x31));  // sub-block 2c+1
      const __m256i abs_first = _mm256_sign_epi8(first, first), abs_second = _mm256_sign_epi8(second, second);
      int16_t scale[2];
      for (int h = 0; h < 2; h++) {
        const int ib = 2 * c + h;
        scale[h] = int16_t(iq4_xs_run_scale(blk, ib));
      }
      const __m256i sc_first = _mm256_set1_epi16(scale[0]), sc_second = _mm256_set1_epi16(scale[1]);
      for (int j = 0; j < NX; j++) {
        const int8_t* y = act_row<BlockQ8K>(x, xs, j)[b].qs + 64 * c;
        const __m256i y0 = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y)), first);
        const __m256i y1 = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32)), second);
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_first, y0), sc_first);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_second, y1), sc_second);
        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p0, p1));
      }
    }
    for (int j = 0; j < NX; j++) acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * act_row<BlockQ8K>(x, xs, j)[b].d), sum_i32(sumi[j]), acc[j]);
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]);
}

// Q4_1 / Q5_1: unsigned quants with a per-block minimum. dot = d sum(q y) + m sum(y): the first an
// exact integer sum per block, the second the same for every weight row, so the activation rows
// carry it (BlockQ8Sum, their own layout) instead of each row recomputing it.
struct BlockQ8Sum {
  float d;
  float d_sum;  // d x sum(qs)
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8Sum) * 8 <= 2 * 256 + 256 / 8, "fits kRowsActivationBytes");

void quantize_q8_sum(const float* x, void* out, int64_t n) {
  auto* y = static_cast<BlockQ8Sum*>(out);
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    const float d = block_amax(x, 32) / 127.0f;
    const int sum = quantize_32(x, d > 0.0f ? 1.0f / d : 0.0f, y[b].qs);
    y[b].d = d;
    y[b].d_sum = d * float(sum);
  }
}

struct UnsignedQ4_1 {
  using Block = BlockQ4_1;
  static __m256i load(const Block& w) { return unpack_nibbles_32(w.qs); }
};
struct UnsignedQ5_1 {
  using Block = BlockQ5_1;
  static __m256i load(const Block& w) { return _mm256_or_si256(unpack_nibbles_32(w.qs), high_bits_32(w.qh)); }
};

template <typename U, int NX>
void dot_min_family_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const typename U::Block*>(w);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 acc[NX];
  float min_acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps(), min_acc[j] = 0.0f;
  for (int64_t b = 0; b < n / 32; b++) {
    const __m256i q = U::load(wb[b]);
    const float dw = h2f(wb[b].d), mw = h2f(wb[b].m);
    for (int j = 0; j < NX; j++) {
      const BlockQ8Sum& yb = act_row<BlockQ8Sum>(x, xs, j)[b];
      const __m256i qy = _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.qs))), ones16);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * yb.d), sum_i32(qy), acc[j]);
      min_acc[j] += mw * yb.d_sum;
    }
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]) + min_acc[j];
}
template <int NX>
void dot_q4_1_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_min_family_t<UnsignedQ4_1, NX>(n, w, x, xs, out);
}
template <int NX>
void dot_q5_1_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_min_family_t<UnsignedQ5_1, NX>(n, w, x, xs, out);
}

// 4-bit indexes into 16 signed levels (IQ4_NL; MXFP4 with its E2M1 levels doubled, so they are
// integers), on BlockQ8 activations: |level| x sign(y, level) as in the Q8_0 family. A format gives
// the block, its levels and the block's float scale.
template <typename F, int NX>
void dot_levels_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const typename F::Block*>(w);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(F::levels())));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; b++) {
    const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles_32(wb[b].qs));
    const __m256i aq = _mm256_sign_epi8(q, q);
    const float dw = F::scale(wb[b]);
    for (int j = 0; j < NX; j++) {
      const BlockQ8& yb = act_row<BlockQ8>(x, xs, j)[b];
      const __m256i y = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.qs)), q);
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, y), ones);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * yb.d), sum_i32(p), acc[j]);
    }
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]);
}

// IQ4_NL: Q4_0's layout (f16 d, 16 bytes of nibbles) with the nibbles indexing the signed levels.
struct Iq4NlLevels {
  using Block = loom_block_q4_0;
  static const int8_t* levels() { return kIq4Levels; }
  static float scale(const Block& b) { return h2f(b.d); }
};

// MXFP4 (gpt-oss's experts): the block's E8M0 exponent as ggml's half scale, on the same BlockQ8
// activations ggml uses.
struct Mxfp4Levels {
  using Block = loom_block_mxfp4;
  static const int8_t* levels() { return plugin_support::kMxfp4Levels; }
  static float scale(const Block& b) { return plugin_support::mxfp4_half_scale(b.e); }
};

template <int NX>
void dot_iq4_nl_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_levels_t<Iq4NlLevels, NX>(n, w, x, xs, out);
}
template <int NX>
void dot_mxfp4_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_levels_t<Mxfp4Levels, NX>(n, w, x, xs, out);
}

}  // namespace

WeightKernels avx2_mxfp4_kernels() {
  return {tile_dispatch<dot_mxfp4_t<1>, dot_mxfp4_t<2>, dot_mxfp4_t<3>, dot_mxfp4_t<4>>, rows_dot<dot_mxfp4_t<1>>};
}

WeightKernels avx2_q4_1_kernels() {
  return {tile_dispatch<dot_q4_1_t<1>, dot_q4_1_t<2>, dot_q4_1_t<3>, dot_q4_1_t<4>>, rows_dot<dot_q4_1_t<1>>, quantize_q8_sum,
          quantize_q8_sum};
}
WeightKernels avx2_q5_1_kernels() {
  return {tile_dispatch<dot_q5_1_t<1>, dot_q5_1_t<2>, dot_q5_1_t<3>, dot_q5_1_t<4>>, rows_dot<dot_q5_1_t<1>>, quantize_q8_sum,
          quantize_q8_sum};
}
WeightKernels avx2_iq4_nl_kernels() {
  return {tile_dispatch<dot_iq4_nl_t<1>, dot_iq4_nl_t<2>, dot_iq4_nl_t<3>, dot_iq4_nl_t<4>>, rows_dot<dot_iq4_nl_t<1>>};
}

WeightKernels avx2_q5_k_kernels() {
  return {tile_dispatch<dot_q5_k_t<1>, dot_q5_k_t<2>, dot_q5_k_t<3>, dot_q5_k_t<4>>, rows_dot<dot_q5_k_t<1>>};
}
WeightKernels avx2_q2_k_kernels() {
  return {tile_dispatch<dot_q2_k_t<1>, dot_q2_k_t<2>, dot_q2_k_t<3>, dot_q2_k_t<4>>, rows_dot<dot_q2_k_t<1>>};
}
WeightKernels avx2_q3_k_kernels() {
  return {tile_dispatch<dot_q3_k_t<1>, dot_q3_k_t<2>, dot_q3_k_t<3>, dot_q3_k_t<4>>, rows_dot<dot_q3_k_t<1>>};
}
WeightKernels avx2_iq4_xs_kernels() {
  return {tile_dispatch<dot_iq4_xs_t<1>, dot_iq4_xs_t<2>, dot_iq4_xs_t<3>, dot_iq4_xs_t<4>>, rows_dot<dot_iq4_xs_t<1>>};
}

}  // namespace loom::cpu

#else  // not built for x86-64 AVX2

namespace loom::cpu {
WeightKernels avx2_q5_k_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_q2_k_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_q3_k_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_iq4_xs_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_q4_1_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_q5_1_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_iq4_nl_kernels() { return {nullptr, nullptr}; }
WeightKernels avx2_mxfp4_kernels() { return {nullptr, nullptr}; }
}  // namespace loom::cpu

#endif
