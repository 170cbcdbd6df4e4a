// AVX2 + FMA + F16C kernels. This file alone is compiled with -mavx2 -mfma -mf16c; nothing here runs
// unless FastOps checked the CPU with __builtin_cpu_supports first.
//
// Matmul kernels take up to kMaxTile activation rows per call: each weight block is loaded and
// unpacked once and multiplied into every row of the tile, which is what makes prefill fast.
#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "activation.h"
#include "cpu_tensor.h"
#include "kernels_avx2_common.h"
#include "kernels_avx2_encoder.h"
#include "kernels_avx2_gemm.h"
#include "kernels_avx2_fp8.h"
#include "kernels_avx2_kquants.h"

namespace loom::cpu {
namespace {

using namespace avx2;

// ---- activation quantization ----------------------------------------------------------------------
void quantize_q8(const float* x, BlockQ8* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    const float d = block_amax(x, 32) / 127.0f;
    quantize_32(x, d > 0.0f ? 1.0f / d : 0.0f, y[b].qs);
    y[b].d = d;
  }
}

void quantize_q8k(const float* x, BlockQ8K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    const float d = block_amax(x, 256) / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int c = 0; c < 8; c++) quantize_32(x + 32 * c, id, y[b].qs + 32 * c);
    for (int g = 0; g < 16; g++) {
      int sum = 0;
      for (int i = 0; i < 16; i++) sum += y[b].qs[16 * g + i];
      y[b].bsums[g] = int16_t(sum);
    }
    y[b].d = d;
  }
}

// ---- quantized row · tile of activation rows -----------------------------------------------------------

// Q4_0 / Q5_0 / Q8_0 row · tile: the weights as signed bytes q, then |q| x sign(y, q) through
// maddubs. The integer dot product of each block is exact (Q4_0's -8 and Q5_0's -16 offsets are
// applied to the bytes, not subtracted in floating point afterwards, where the cancellation costs
// accuracy), and only the per-block scale is floating point.
template <typename S, int NX>
void dot_q8_family_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const typename S::Block*>(w);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps();
  // Tiled matrices keep their rows contiguous: fetch the row after next a line per block, so a batch
  // of few tokens per row (a mixture of experts' matmul) does not wait on DRAM (see kernels_avx512.cpp).
  const char* ahead = reinterpret_cast<const char*>(wb + 2 * (n / 32));
  const int64_t ahead_lines = int64_t((n / 32) * sizeof(typename S::Block) + 63) / 64;
  for (int64_t b = 0; b < n / 32; b++) {
    if (b < ahead_lines) _mm_prefetch(ahead + 64 * b, _MM_HINT_T0);
    const __m256i q = S::load(wb[b]);
    const __m256i aq = _mm256_sign_epi8(q, q);  // |q| as unsigned; the sign moves onto y
    const float dw = h2f(wb[b].d);
    for (int j = 0; j < NX; j++) {
      const BlockQ8& yb = act_row<BlockQ8>(x, xs, j)[b];
      const __m256i y = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.qs)), q);
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, y), ones);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * yb.d), sum_i32(p), acc[j]);
    }
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]);
}
template <int NX>
void dot_q4_0_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_q8_family_t<SignedQ4_0, NX>(n, w, x, xs, out);
}
template <int NX>
void dot_q5_0_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_q8_family_t<SignedQ5_0, NX>(n, w, x, xs, out);
}
template <int NX>
void dot_q8_0_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  dot_q8_family_t<SignedQ8_0, NX>(n, w, x, xs, out);
}

template <int NX>
void dot_q4_k_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const loom_block_q4_k*>(w);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  __m256 acc[NX];
  float mins[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps(), mins[j] = 0.0f;
  for (int64_t b = 0; b < n / 256; b++) {
    const loom_block_q4_k& blk = wb[b];
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
    for (int c = 0; c < 4; c++) {  // 64 values: 32 low nibbles (sub-block 2c), 32 high (2c+1)
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
      const __m256i lo = _mm256_and_si256(raw, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      const __m256i sc_lo = _mm256_set1_epi16(sc[2 * c]), sc_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int j = 0; j < NX; j++) {
        const int8_t* y = act_row<BlockQ8K>(x, xs, j)[b].qs + 64 * c;
        const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y));
        const __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32));
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo), sc_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi), sc_hi);
        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    for (int j = 0; j < NX; j++)
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * act_row<BlockQ8K>(x, xs, j)[b].d), sum_i32(sumi[j]), acc[j]);
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]) - mins[j];
}

template <int NX>
void dot_q6_k_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  const auto* wb = static_cast<const loom_block_q6_k*>(w);
  __m256 acc[NX];
  float offs[NX];
  for (int j = 0; j < NX; j++) acc[j] = _mm256_setzero_ps(), offs[j] = 0.0f;
  for (int64_t b = 0; b < n / 256; b++) {
    const loom_block_q6_k& blk = wb[b];
    const float d = h2f(blk.d);
    __m256i sumi[NX];
    for (int j = 0; j < NX; j++) {
      sumi[j] = _mm256_setzero_si256();
      // Quants are stored +32; subtract 32 * sum(scale_g * sum(y in group g)) once per block.
      const BlockQ8K& yb = act_row<BlockQ8K>(x, xs, j)[b];
      int corr = 0;
      for (int g = 0; g < 16; g++) corr += blk.scales[g] * yb.bsums[g];
      offs[j] += d * yb.d * 32.0f * float(corr);
    }
    for (int h = 0; h < 2; h++) {
      __m256i q[4];
      unpack_q6_k_128(blk.ql + 64 * h, blk.qh + 32 * h, q);
      const int8_t* sc = blk.scales + 8 * h;
      __m256i scv[4];
      for (int k = 0; k < 4; k++)  // 16 values per scale: low 128-bit lane uses sc[2k], high sc[2k+1]
        scv[k] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
      for (int j = 0; j < NX; j++) {
        const int8_t* y = act_row<BlockQ8K>(x, xs, j)[b].qs + 128 * h;
        for (int k = 0; k < 4; k++) {
          const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * k));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], yv), scv[k]));
        }
      }
    }
    for (int j = 0; j < NX; j++)
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * act_row<BlockQ8K>(x, xs, j)[b].d), sum_i32(sumi[j]), acc[j]);
  }
  for (int j = 0; j < NX; j++) out[j] = hsum(acc[j]) - offs[j];
}

// ---- float-activation rows (F32 / F16 / BF16 weights) ------------------------------------------------
struct LoadF32 {
  static __m256 load(const void* w, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(w) + i); }
  static float one(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
};
struct LoadF16 {
  static __m256 load(const void* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
  }
  static float one(const void* w, int64_t i) { return h2f(static_cast<const uint16_t*>(w)[i]); }
};
struct LoadBF16 {
  static __m256 load(const void* w, int64_t i) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float one(const void* w, int64_t i) { return bf16_to_float(static_cast<const uint16_t*>(w)[i]); }
};

template <typename L, int NX>
void dot_float_t(int64_t n, const void* w, const void* x, size_t xs, float* out) {
  // Two accumulators per row hide the FMA latency when the tile is a single token (decode).
  __m256 acc0[NX], acc1[NX];
  for (int j = 0; j < NX; j++) acc0[j] = acc1[j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = L::load(w, i), w1 = L::load(w, i + 8);
    for (int j = 0; j < NX; j++) {
      const float* y = act_row<float>(x, xs, j);
      acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(y + i), acc0[j]);
      acc1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(y + i + 8), acc1[j]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 w0 = L::load(w, i);
    for (int j = 0; j < NX; j++) acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(act_row<float>(x, xs, j) + i), acc0[j]);
  }
  for (int j = 0; j < NX; j++) {
    float s = hsum(_mm256_add_ps(acc0[j], acc1[j]));
    for (int64_t k = i; k < n; k++) s += L::one(w, k) * act_row<float>(x, xs, j)[k];
    out[j] = s;
  }
}

#define LOOM_TILED(fn) WeightKernels{tile_dispatch<fn<1>, fn<2>, fn<3>, fn<4>>, rows_dot<fn<1>>}
#define LOOM_TILED_F(L) \
  WeightKernels{tile_dispatch<dot_float_t<L, 1>, dot_float_t<L, 2>, dot_float_t<L, 3>, dot_float_t<L, 4>>, rows_dot<dot_float_t<L, 1>>}

// ---- attention / element-wise helpers ------------------------------------------------------------------
template <typename L>
float vdot(const void* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(L::load(a, i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(L::load(a, i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(L::load(a, i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; i++) s += L::one(a, i) * b[i];
  return s;
}
struct LoadI8 {
  static __m256 load(const void* w, int64_t i) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(w) + i));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  }
  static float one(const void* w, int64_t i) { return float(static_cast<const int8_t*>(w)[i]); }
};
template <typename L>
void axpy(float a, const void* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, L::load(x, i), _mm256_loadu_ps(y + i)));
  for (; i < n; i++) y[i] += a * L::one(x, i);
}

float vdot_f32(const float* a, const float* b, int64_t n) { return vdot<LoadF32>(a, b, n); }
float vdot_f16(const uint16_t* a, const float* b, int64_t n) { return vdot<LoadF16>(a, b, n); }
float vdot_i8(const int8_t* a, const float* b, int64_t n) { return vdot<LoadI8>(a, b, n); }
void axpy_f32(float a, const float* x, float* y, int64_t n) { axpy<LoadF32>(a, x, y, n); }
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) { axpy<LoadF16>(a, x, y, n); }
void axpy_i8(float a, const int8_t* x, float* y, int64_t n) { axpy<LoadI8>(a, x, y, n); }

void decay_add_outer(float* s, int64_t rows, int64_t n, float decay, const float* u, const float* k) {
  const __m256 dv = _mm256_set1_ps(decay);
  for (int64_t j = 0; j < rows; j++, s += n) {
    const __m256 uv = _mm256_set1_ps(u[j]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_fmadd_ps(uv, _mm256_loadu_ps(k + i), _mm256_mul_ps(dv, _mm256_loadu_ps(s + i))));
    for (; i < n; i++) s[i] = decay * s[i] + u[j] * k[i];
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, LoadF16::load(x, i));
  for (; i < n; i++) y[i] = h2f(x[i]);
}

// From this many tokens a batched matmul runs as float GEMM (loom_cpu_kernel_bench on a 2-core AVX2
// EPYC: at 4 tokens the integer tiles are 20% faster, at 8 the GEMM 0-15%, at 16 20-45%, at 512 1.3-1.9x).
constexpr int64_t kGemmMinTokens = 8;

// The positional table, then the members added after it by name.
Kernels with_float_dots(Kernels k) {
  k.float_dots = avx2_float_gemm().gemm;
  k.exp_shifted = exp_shifted_avx2;
  k.weighted_values = avx2_weighted_values();
  k.encoder_attention = avx2_encoder_attention();
  k.decay_add_outer = decay_add_outer;
  // The AVX-512 table inherits it: its F16 tiles reach 57 G multiply-adds/s on 2 threads at 4096
  // tokens (a vision encoder's matmuls), the GEMM several times that.
  k.float_weight_gemm = avx2_float_gemm();
  k.float_weight_gemm_min_tokens = kGemmMinTokens;
  k.f8_e4m3_b32 = avx2_f8_e4m3_b32_kernels();
  return k;
}

const Kernels kAvx2 = with_float_dots({"avx2",
                       quantize_q8,
                       quantize_q8k,
                       LOOM_TILED(dot_q4_0_t),
                       LOOM_TILED(dot_q5_0_t),
                       LOOM_TILED(dot_q8_0_t),
                       LOOM_TILED(dot_q4_k_t),
                       LOOM_TILED(dot_q6_k_t),
                       LOOM_TILED_F(LoadF16),
                       LOOM_TILED_F(LoadBF16),
                       LOOM_TILED_F(LoadF32),
                       vdot_f32,
                       vdot_f16,
                       vdot_i8,
                       axpy_f32,
                       axpy_f16,
                       axpy_i8,
                       f32_to_f16,
                       f16_to_f32,
                       activation_row_avx2,
                       avx2_q5_k_kernels(),
                       avx2_iq4_xs_kernels(),
                       avx2_q4_1_kernels(),
                       avx2_q5_1_kernels(),
                       avx2_iq4_nl_kernels(),
                       avx2_q2_k_kernels(),
                       avx2_q3_k_kernels(),
                       avx2_float_gemm(),
                       kGemmMinTokens,
                       avx2_mxfp4_kernels()});

}  // namespace

const Kernels* avx2_kernels() { return &kAvx2; }

}  // namespace loom::cpu

#else  // not built for x86-64 AVX2

namespace loom::cpu {
const Kernels* avx2_kernels() { return nullptr; }
}  // namespace loom::cpu

#endif
