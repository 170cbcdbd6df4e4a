// F16 / BF16 conversion and GGML's simple block formats Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1, following
// quantize_row_*_ref and dequantize_row_* exactly (same operations in
// the same order, so the bytes match GGML's).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "ggml_blocks.h"
#include "half.h"

namespace loom::quant {

bool quantize_row_f16(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    if (!is_fp16_finite(h)) return false;
    std::memcpy(dst + 2 * i, &h, 2);
  }
  return true;
}

void dequantize_row_f16(const uint8_t* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    y[i] = fp16_to_fp32(h);
  }
}

bool quantize_row_bf16(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(x[i]);
    if ((h & 0x7f80u) == 0x7f80u) return false;  // rounded up past the largest finite bf16
    std::memcpy(dst + 2 * i, &h, 2);
  }
  return true;
}

void dequantize_row_bf16(const uint8_t* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    y[i] = bf16_to_fp32(h);
  }
}

// ---- Q8_0: 32 values, symmetric, d = amax / 127 -------------------------------------------------

bool quantize_row_q8_0(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t b = 0; b < n / LOOM_QK8_0; ++b, x += LOOM_QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < LOOM_QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    loom_block_q8_0 block;
    block.d = fp32_to_fp16(d);
    if (!is_fp16_finite(block.d)) return false;
    // GGML rounds half away from zero here (roundf), unlike the K-quants.
    for (int j = 0; j < LOOM_QK8_0; ++j) block.qs[j] = static_cast<int8_t>(std::round(x[j] * inv_d));
    std::memcpy(dst + b * sizeof(block), &block, sizeof(block));
  }
  return true;
}

void dequantize_row_q8_0(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK8_0; ++b) {
    loom_block_q8_0 block;
    std::memcpy(&block, src + b * sizeof(block), sizeof(block));
    const float d = fp16_to_fp32(block.d);
    for (int j = 0; j < LOOM_QK8_0; ++j) *y++ = block.qs[j] * d;
  }
}

// ---- Q4_0: 32 values, d = max / -8 (the signed extreme maps to -8), q in 0..15 stored q - 8 ------

bool quantize_row_q4_0(const float* x, uint8_t* dst, int64_t n, const float*) {
  constexpr int qk = LOOM_QK4_0;
  for (int64_t b = 0; b < n / qk; ++b, x += qk) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < qk; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    loom_block_q4_0 block;
    block.d = fp32_to_fp16(d);
    if (!is_fp16_finite(block.d)) return false;
    for (int j = 0; j < qk / 2; ++j) {
      // Truncation after +8.5 is GGML's rounding; the opposite extreme (+8) is clamped to 15.
      const uint8_t lo = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * inv_d + 8.5f))));
      const uint8_t hi =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j + qk / 2] * inv_d + 8.5f))));
      block.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    std::memcpy(dst + b * sizeof(block), &block, sizeof(block));
  }
  return true;
}

void dequantize_row_q4_0(const uint8_t* src, float* y, int64_t n) {
  constexpr int qk = LOOM_QK4_0;
  for (int64_t b = 0; b < n / qk; ++b, y += qk) {
    loom_block_q4_0 block;
    std::memcpy(&block, src + b * sizeof(block), sizeof(block));
    const float d = fp16_to_fp32(block.d);
    for (int j = 0; j < qk / 2; ++j) {
      y[j] = ((block.qs[j] & 0x0F) - 8) * d;
      y[j + qk / 2] = ((block.qs[j] >> 4) - 8) * d;
    }
  }
}


// ---- Q4_1 / Q5_1: 32 values, x = d * q + min with q in 0..15 / 0..31 ----------------------------
// ---- Q5_0: 32 values, d = max / -16, q in 0..31 stored q - 16 -------------------------------------
// quantize_row_q4_1_ref, _q5_0_ref, _q5_1_ref: the fifth bit of element j goes to bit j of qh.

namespace {

void min_max(const float* x, int n, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

}  // namespace

bool quantize_row_q4_1(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float min, max;
    min_max(x, 32, min, max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    BlockQ4_1 y;
    y.d = fp32_to_fp16(d);
    y.m = fp32_to_fp16(min);
    if (!is_fp16_finite(y.d) || !is_fp16_finite(y.m)) return false;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      y.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q4_1(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    BlockQ4_1 x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    const float d = fp16_to_fp32(x.d), m = fp16_to_fp32(x.m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (x.qs[j] & 0x0F) * d + m;
      y[j + 16] = (x.qs[j] >> 4) * d + m;
    }
  }
}

bool quantize_row_q5_0(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    loom_block_q5_0 y;
    y.d = fp32_to_fp16(d);
    if (!is_fp16_finite(y.d)) return false;
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(31, static_cast<int8_t>(x[j] * id + 16.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(31, static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= uint32_t((q0 & 0x10u) >> 4) << j;
      qh |= uint32_t((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y.qh, &qh, 4);
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q5_0(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    loom_block_q5_0 x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    const float d = fp16_to_fp32(x.d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (x.qs[j] & 0x0F) | int(((qh >> j) << 4) & 0x10);
      const int q1 = (x.qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
      y[j] = (q0 - 16) * d;
      y[j + 16] = (q1 - 16) * d;
    }
  }
}

bool quantize_row_q5_1(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float min, max;
    min_max(x, 32, min, max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    BlockQ5_1 y;
    y.d = fp32_to_fp16(d);
    y.m = fp32_to_fp16(min);
    if (!is_fp16_finite(y.d) || !is_fp16_finite(y.m)) return false;
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q0 = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
      const uint8_t q1 = static_cast<uint8_t>((x[j + 16] - min) * id + 0.5f);
      y.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= uint32_t((q0 & 0x10u) >> 4) << j;
      qh |= uint32_t((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y.qh, &qh, 4);
    std::memcpy(dst + b * sizeof(y), &y, sizeof(y));
  }
  return true;
}

void dequantize_row_q5_1(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    BlockQ5_1 x;
    std::memcpy(&x, src + b * sizeof(x), sizeof(x));
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    const float d = fp16_to_fp32(x.d), m = fp16_to_fp32(x.m);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (x.qs[j] & 0x0F) | int(((qh >> j) << 4) & 0x10);
      const int q1 = (x.qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
      y[j] = q0 * d + m;
      y[j + 16] = q1 * d + m;
    }
  }
}

}  // namespace loom::quant
