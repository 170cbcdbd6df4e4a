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

bool quantize_row_q4_k(const float* x, uint8_t* dst, int64_t n, const float*) {
  uint8_t L[LOOM_QK_K];
  float mins[LOOM_QK_K / 32];
  float scales[LOOM_QK_K / 32];
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    loom_block_q4_k y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0;  // scales are positive: the min is subtracted
    float max_min = 0;
    for (int j = 0; j < LOOM_QK_K / 32; ++j) {
      scales[j] = fit_k_sub_block(x + 32 * j, 15, -1.f, 20, L + 32 * j, &mins[j]);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    pack_scale_min_k4(scales, mins, max_scale, max_min, y.scales);
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
