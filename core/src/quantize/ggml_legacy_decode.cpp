// GGML's Q4_1 / Q5_0 / Q5_1 block layouts (ggml-common.h), decoded exactly as ggml's
// dequantize_row_* do. Blocks are read byte-wise (memcpy), so unaligned tensor data is fine.
#include <cstring>

#include "gguf/block_quantize.h"
#include "quantize/tensor_codec.h"

namespace loom {

namespace {

constexpr int kQK = 32;

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return f16_to_f32(bits);
}

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

void dequantize_row_q4_1(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kBytes = 4 + kQK / 2;  // d, m, qs[16]
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* block = src + b * kBytes;
    const float d = half_at(block), m = half_at(block + 2);
    const uint8_t* qs = block + 4;
    float* y = dst + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kBytes = 2 + 4 + kQK / 2;  // d, qh[4], qs[16]
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* block = src + b * kBytes;
    const float d = half_at(block);
    const uint32_t qh = u32_at(block + 2);
    const uint8_t* qs = block + 6;
    float* y = dst + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t xh_0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
      const uint8_t xh_1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
      const int x0 = ((qs[j] & 0x0F) | xh_0) - 16;
      const int x1 = ((qs[j] >> 4) | xh_1) - 16;
      y[j] = static_cast<float>(x0) * d;
      y[j + kQK / 2] = static_cast<float>(x1) * d;
    }
  }
}

void dequantize_row_q5_1(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kBytes = 4 + 4 + kQK / 2;  // d, m, qh[4], qs[16]
  for (int64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* block = src + b * kBytes;
    const float d = half_at(block), m = half_at(block + 2);
    const uint32_t qh = u32_at(block + 4);
    const uint8_t* qs = block + 8;
    float* y = dst + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t xh_0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
      const uint8_t xh_1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
      const int x0 = (qs[j] & 0x0F) | xh_0;
      const int x1 = (qs[j] >> 4) | xh_1;
      y[j] = static_cast<float>(x0) * d + m;
      y[j + kQK / 2] = static_cast<float>(x1) * d + m;
    }
  }
}

}  // namespace loom
