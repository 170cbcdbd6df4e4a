// GGML's K-quants Q2_K, Q3_K and Q5_K, following quantize_row_q{2,3,5}_K_ref (what llama.cpp's
// quantizer writes without an importance matrix) operation for operation, and their decoders.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "ggml_blocks.h"
#include "half.h"
#include "k_quant_fit.h"

namespace loom::quant {

namespace {

// Q2_K and Q3_K store 2-bit values four to a byte: value j + 32 * s of each 128 in bits 2s of byte j.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < LOOM_QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// The 2-bit value of element i of a 256 super-block (the inverse of pack_2bit).
int unpack_2bit(const uint8_t* qs, int i) {
  const int half = i / 128, in_half = i % 128;
  return (qs[32 * half + in_half % 32] >> (2 * (in_half / 32))) & 3;
}

// Q3_K's 16 signed 6-bit scales (stored + 32): low nibbles in bytes 0..7, high pairs in 8..11.
int q3_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return (low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

}  // namespace

bool quantize_row_q2_k(const float* x, uint8_t* dst, int64_t n, const float*) {
  uint8_t L[LOOM_QK_K], L_aux[16];
  float weights[16], mins[16], scales[16];
  constexpr float q4scale = 15.f;
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    BlockQ2_K y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0, max_min = 0;  // scales are positive: the min is subtracted
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], L_aux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y.d = fp32_to_fp16(max_scale / q4scale);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(y.scales[j] | (nearest_int(iscale * mins[j]) << 4));
      y.dmin = fp32_to_fp16(max_min / q4scale);
    }
    if (!is_fp16_finite(y.d) || !is_fp16_finite(y.dmin)) return false;
    // Re-quantize against the scales as stored.
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y.d) * (y.scales[j] & 0xF);
      if (!d) continue;
      const float dm = fp16_to_fp32(y.dmin) * (y.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + ii] + dm) / d))));
      }
    }
    pack_2bit(L, y.qs);
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q2_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, y += LOOM_QK_K) {
    BlockQ2_K x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d), dmin = fp16_to_fp32(x.dmin);
    for (int i = 0; i < LOOM_QK_K; ++i) {
      const uint8_t sc = x.scales[i / 16];
      y[i] = d * (sc & 0xF) * unpack_2bit(x.qs, i) - dmin * (sc >> 4);
    }
  }
}

bool quantize_row_q3_k(const float* x, uint8_t* dst, int64_t n, const float*) {
  int8_t L[LOOM_QK_K];
  float scales[16];
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    BlockQ3_K y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_scale_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
        if (j < 8) {
          y.scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          y.scales[j - 8] = static_cast<uint8_t>(y.scales[j - 8] | ((l & 0xF) << 4));
        }
        l = static_cast<int8_t>(l >> 4);
        y.scales[j % 4 + 8] = static_cast<uint8_t>(y.scales[j % 4 + 8] | (l << (2 * (j / 4))));
      }
      y.d = fp32_to_fp16(1 / iscale);
      if (!is_fp16_finite(y.d)) return false;
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_fp32(y.d) * q3_scale(y.scales, j);
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + ii] / d))) + 4);
      }
    }
    // The third bit of value j goes to bit j / 32 of hmask[j % 32].
    uint8_t low[LOOM_QK_K];
    for (int j = 0; j < LOOM_QK_K; ++j) {
      int l = L[j];
      if (l > 3) {
        y.hmask[j % 32] = static_cast<uint8_t>(y.hmask[j % 32] | (1 << (j / 32)));
        l -= 4;
      }
      low[j] = static_cast<uint8_t>(l);
    }
    pack_2bit(low, y.qs);
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q3_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, y += LOOM_QK_K) {
    BlockQ3_K x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d);
    for (int i = 0; i < LOOM_QK_K; ++i) {
      const int high = (x.hmask[i % 32] >> (i / 32)) & 1;
      y[i] = d * q3_scale(x.scales, i / 16) * (unpack_2bit(x.qs, i) - (high ? 0 : 4));
    }
  }
}

bool quantize_row_q5_k(const float* x, uint8_t* dst, int64_t n, const float*) {
  uint8_t L[LOOM_QK_K];
  float mins[8], scales[8];
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b, x += LOOM_QK_K) {
    BlockQ5_K y;
    std::memset(&y, 0, sizeof(y));
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      scales[j] = fit_k_sub_block(x + 32 * j, 31, -0.5f, 15, L + 32 * j, &mins[j]);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    pack_scale_min_k4(scales, mins, max_scale, max_min, y.scales);
    y.d = fp32_to_fp16(max_scale / 63.f);
    y.dmin = fp32_to_fp16(max_min / 63.f);
    if (!is_fp16_finite(y.d) || !is_fp16_finite(y.dmin)) return false;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      scale_min_k4(j, y.scales, &sc, &m);
      const float d = fp16_to_fp32(y.d) * sc;
      if (!d) continue;
      const float dm = fp16_to_fp32(y.dmin) * m;
      for (int ii = 0; ii < 32; ++ii) {
        L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(31, nearest_int((x[32 * j + ii] + dm) / d))));
      }
    }
    // Each 64 values: low nibbles of values j and j + 32 share qs byte j; fifth bits go to qh[j]
    // at bits 2k and 2k + 1 for the k-th 64.
    uint8_t* ql = y.qs;
    uint8_t m1 = 1, m2 = 2;
    for (int base = 0; base < LOOM_QK_K; base += 64, ql += 32, m1 = uint8_t(m1 << 2), m2 = uint8_t(m2 << 2)) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[base + j], l2 = L[base + j + 32];
        if (l1 > 15) l1 -= 16, y.qh[j] = static_cast<uint8_t>(y.qh[j] | m1);
        if (l2 > 15) l2 -= 16, y.qh[j] = static_cast<uint8_t>(y.qh[j] | m2);
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q5_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; ++b) {
    BlockQ5_K x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d), dmin = fp16_to_fp32(x.dmin);
    const uint8_t* ql = x.qs;
    for (int k = 0; k < 4; ++k, ql += 32) {
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, m;
        scale_min_k4(2 * k + half, x.scales, &sc, &m);
        for (int j = 0; j < 32; ++j) {
          const int low = half ? ql[j] >> 4 : ql[j] & 0xF;
          const int high = (x.qh[j] >> (2 * k + half)) & 1;
          *y++ = d * sc * (low + 16 * high) - dmin * m;
        }
      }
    }
  }
}

}  // namespace loom::quant
