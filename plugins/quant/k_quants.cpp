// GGML's K-quants Q4_K and Q6_K: 256-value super-blocks with quantized sub-block scales.
// The search procedures follow GGML's reference (quantize_row_q4_K_ref with make_qkx2_quants,
// quantize_row_q6_K_ref with make_qx_quants) operation for operation, in f32, so that the bytes
// match GGML's. Do not "simplify" the arithmetic: the evaluation order is part of the format's
// reference behaviour.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "half.h"
#include "k_quant_fit.h"

namespace loom::quant {

namespace {

// Q4_K's 12 scale bytes hold eight 6-bit (scale, min) pairs: pairs 0..3 in the low 6 bits of
// bytes 0..3 (scales) and 4..7 (mins); pairs 4..7 as nibbles in bytes 8..11 with their top two
// bits in the high bits of bytes 0..7.
void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

}  // namespace

bool quantize_row_q4_k(const float* x, uint8_t* dst, int64_t n, const float*) {
  uint8_t L[LOOM_QK_K];
  uint8_t L_aux[32];
  float weights[32];
  float mins[LOOM_QK_K / 32];
  float scales[LOOM_QK_K / 32];
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    loom_block_q4_k y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0;  // scales are positive: the min is subtracted
    float max_min = 0;
    for (int j = 0; j < LOOM_QK_K / 32; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = fit_scale_min(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], L_aux, -1.f, 0.1f, 20);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < LOOM_QK_K / 32; ++j) {
      const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
      const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
      if (j < 4) {
        y.scales[j] = ls;
        y.scales[j + 4] = lm;
      } else {
        y.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        y.scales[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    y.d = fp32_to_fp16(max_scale / 63.f);
    y.dmin = fp32_to_fp16(max_min / 63.f);
    if (!is_fp16_finite(y.d) || !is_fp16_finite(y.dmin)) return false;
    // Re-quantize against the scales as stored (6-bit, f16), not the searched ones.
    for (int j = 0; j < LOOM_QK_K / 32; ++j) {
      uint8_t sc, m;
      scale_min_k4(j, y.scales, &sc, &m);
      const float d = fp16_to_fp32(y.d) * sc;
      if (!d) continue;
      const float dm = fp16_to_fp32(y.dmin) * m;
      for (int ii = 0; ii < 32; ++ii) {
        const int l = nearest_int((x[32 * j + ii] + dm) / d);
        L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(15, l)));
      }
    }
    uint8_t* q = y.qs;
    for (int j = 0; j < LOOM_QK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q4_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b) {
    loom_block_q4_k x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d);
    const float min = fp16_to_fp32(x.dmin);
    const uint8_t* q = x.qs;
    int is = 0;
    for (int j = 0; j < LOOM_QK_K; j += 64, q += 32, is += 2) {
      uint8_t sc, m;
      scale_min_k4(is + 0, x.scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      scale_min_k4(is + 1, x.scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

bool quantize_row_q6_k(const float* x, uint8_t* dst, int64_t n, const float*) {
  int8_t L[LOOM_QK_K];
  float scales[LOOM_QK_K / 16];
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    loom_block_q6_k y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < LOOM_QK_K / 16; ++ib) {
      scales[ib] = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // all zero: an all-zero block (d = 0)
      std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    if (!is_fp16_finite(y.d)) return false;
    for (int ib = 0; ib < LOOM_QK_K / 16; ++ib) {
      y.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < LOOM_QK_K / 16; ++j) {
      const float d = fp16_to_fp32(y.d) * y.scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y.ql;
    uint8_t* qh = y.qh;
    for (int j = 0; j < LOOM_QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
    }
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q6_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b) {
    loom_block_q6_k x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d);
    const uint8_t* ql = x.ql;
    const uint8_t* qh = x.qh;
    const int8_t* sc = x.scales;
    for (int n128 = 0; n128 < LOOM_QK_K; n128 += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        const int8_t q2 = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        const int8_t q3 = static_cast<int8_t>(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        const int8_t q4 = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

}  // namespace loom::quant
