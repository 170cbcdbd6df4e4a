// GGML's non-linear 4-bit formats IQ4_NL (blocks of 32, one f16 scale) and IQ4_XS (super-blocks of
// 256: eight 6-bit sub-block scales under one f16). Each value is an index into kIq4Values. The
// search follows quantize_row_iq4_nl_impl as llama.cpp's quantizer runs it (ggml_quantize_chunk:
// weights x^2 without an importance matrix, 7 scale tries either side), operation for operation.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "ggml_blocks.h"
#include "half.h"
#include "k_quant_fit.h"

namespace loom::quant {

namespace {

constexpr int kTries = 7;

// Index of the level nearest to x (ties to the lower one), by bisection over the sorted levels.
int nearest_level(float x) {
  const int8_t* v = kIq4Values;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// Best scale for one block of 32: start from max / v[0], try (t + v[0]) / max for t in -7..7, keep
// the x^2-weighted least-squares scale of the best assignment. 0 for an all-zero block.
float fit_block(const float* x, uint8_t* L) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  float d = -max / kIq4Values[0];
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIq4Values[l];
    const float w = weight[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    id = (t + kIq4Values[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kIq4Values[nearest_level(id * x[j])];
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Indices of 32 values: element j in the low nibble of qs[j], element j + 16 in the high nibble.
void pack_block(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

void unpack_block(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4Values[qs[j] & 0xF];
    y[j + 16] = d * kIq4Values[qs[j] >> 4];
  }
}

}  // namespace

bool quantize_row_iq4_nl(const float* x, uint8_t* dst, int64_t n, const float*) {
  uint8_t L[32];
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    BlockIQ4_NL y;
    const float d = fit_block(x, L);
    y.d = fp32_to_fp16(d);
    if (!is_fp16_finite(y.d)) return false;
    const float id = d ? 1 / d : 0;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
    pack_block(L, y.qs);
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_iq4_nl(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    BlockIQ4_NL x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    unpack_block(x.qs, fp16_to_fp32(x.d), y);
  }
}

bool quantize_row_iq4_xs(const float* x, uint8_t* dst, int64_t n, const float*) {
  uint8_t L[LOOM_QK_K];
  float scales[8];
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    BlockIQ4_XS y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
      scales[ib] = fit_block(x + 32 * ib, L + 32 * ib);
      if (std::fabs(scales[ib]) > amax_scale) {
        amax_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    // Sub-block scales as signed 6-bit multiples of d = -max_scale / 32; values re-fitted to them.
    const float d = -max_scale / 32;
    y.d = fp32_to_fp16(d);
    if (!is_fp16_finite(y.d)) return false;
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
      const float dl = d * l;
      const float idl = dl ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(nearest_level(idl * x[32 * ib + j]));
      l += 32;
      const uint8_t low = static_cast<uint8_t>(l & 0xF), high = static_cast<uint8_t>(l >> 4);
      y.scales_l[ib / 2] = static_cast<uint8_t>(ib % 2 == 0 ? low : y.scales_l[ib / 2] | (low << 4));
      y.scales_h = static_cast<uint16_t>(y.scales_h | (high << (2 * ib)));
    }
    for (int ib = 0; ib < 8; ++ib) pack_block(L + 32 * ib, y.qs + 16 * ib);
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_iq4_xs(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b) {
    BlockIQ4_XS x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d);
    for (int ib = 0; ib < 8; ++ib, y += 32) {
      const int ls = ((x.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x.scales_h >> (2 * ib)) & 3) << 4);
      unpack_block(x.qs + 16 * ib, d * (ls - 32), y);
    }
  }
}

}  // namespace loom::quant
