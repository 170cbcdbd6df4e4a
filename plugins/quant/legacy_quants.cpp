// F16 / BF16 conversion and GGML's simple block formats Q8_0 and Q4_0, following
// quantize_row_q8_0_ref / quantize_row_q4_0_ref and dequantize_row_* exactly (same operations in
// the same order, so the bytes match GGML's).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
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

}  // namespace loom::quant
