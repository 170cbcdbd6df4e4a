#include "gguf/block_quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "gguf/dtype_traits.h"

namespace loom {

uint16_t f32_to_f16(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) {  // inf or nan (keep nan quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
  }
  const int32_t half_exponent = static_cast<int32_t>(exponent) - 127 + 15;
  if (half_exponent >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (half_exponent <= 0) {
    if (half_exponent < -10) return static_cast<uint16_t>(sign);  // underflows to zero
    mantissa |= 0x800000u;                                          // subnormal: make the leading 1 explicit
    const auto shift = static_cast<uint32_t>(14 - half_exponent);
    uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  uint32_t half = sign | (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent (up to inf).
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out = 0;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;
  } else {  // subnormal: normalise
    int32_t e = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    out = sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

uint16_t f32_to_bf16(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 64u);  // quiet nan
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

void quantize_block_q8_0(const float* x, loom_block_q8_0* out) {
  float amax = 0.0f;
  for (int j = 0; j < LOOM_QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out->d = f32_to_f16(d);
  for (int j = 0; j < LOOM_QK8_0; ++j) out->qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
}

void quantize_block_q4_0(const float* x, loom_block_q4_0* out) {
  float amax = 0.0f;
  float max = 0.0f;  // the signed value of largest magnitude, so its sign picks which end gets -8
  for (int j = 0; j < LOOM_QK4_0; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out->d = f32_to_f16(d);
  for (int j = 0; j < LOOM_QK4_0 / 2; ++j) {
    const auto lo = std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const auto hi = std::min<uint8_t>(15, static_cast<uint8_t>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    out->qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

namespace {

constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128), exactly (ggml's GGML_E8M0_TO_FP32_HALF, subnormal for e < 2).
float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// ggml's quantize_row_mxfp4_ref: the exponent from the block's largest magnitude, then each value
// to the nearest level (the first on a tie).
void quantize_block_mxfp4(const float* x, loom_block_mxfp4* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
  const float d = mxfp4_half_scale(e);
  auto best = [&](float v) {
    int index = 0;
    float err = std::fabs(kMxfp4Values[0] * d - v);
    for (int i = 1; i < 16; ++i) {
      const float e_i = std::fabs(kMxfp4Values[i] * d - v);
      if (e_i < err) index = i, err = e_i;
    }
    return static_cast<uint8_t>(index);
  };
  out->e = e;
  for (int j = 0; j < 16; ++j) out->qs[j] = static_cast<uint8_t>(best(x[j]) | (best(x[j + 16]) << 4));
}

void check_supported(loom_dtype type, const char* what) {
  if (type != LOOM_DTYPE_F32 && type != LOOM_DTYPE_F16 && type != LOOM_DTYPE_BF16 && type != LOOM_DTYPE_Q8_0 &&
      type != LOOM_DTYPE_Q4_0 && type != LOOM_DTYPE_MXFP4) {
    throw Error(std::string(what) + ": type " + dtype_name(type) + " is not supported (F32, F16, BF16, Q8_0, Q4_0, MXFP4)");
  }
}

}  // namespace

std::vector<uint8_t> quantize_rows(loom_dtype type, std::span<const float> values, int64_t row_length) {
  check_supported(type, "quantize_rows");
  if (row_length <= 0 || values.size() % static_cast<uint64_t>(row_length) != 0) {
    throw Error("quantize_rows: " + std::to_string(values.size()) + " values are not whole rows of " +
                std::to_string(row_length));
  }
  const uint64_t n_rows = values.size() / static_cast<uint64_t>(row_length);
  std::vector<uint8_t> out(dtype_row_bytes(type, row_length) * n_rows);  // throws on a partial block
  uint8_t* dst = out.data();
  const float* src = values.data();
  if (type == LOOM_DTYPE_F32) {
    std::memcpy(dst, src, values.size() * sizeof(float));
  } else if (type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_BF16) {
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = type == LOOM_DTYPE_F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    for (size_t b = 0; b < values.size() / 32; ++b) {
      if (type == LOOM_DTYPE_Q8_0) {
        loom_block_q8_0 block;
        quantize_block_q8_0(src + 32 * b, &block);
        std::memcpy(dst + sizeof block * b, &block, sizeof block);
      } else if (type == LOOM_DTYPE_MXFP4) {
        loom_block_mxfp4 block;
        quantize_block_mxfp4(src + 32 * b, &block);
        std::memcpy(dst + sizeof block * b, &block, sizeof block);
      } else {
        loom_block_q4_0 block;
        quantize_block_q4_0(src + 32 * b, &block);
        std::memcpy(dst + sizeof block * b, &block, sizeof block);
      }
    }
  }
  return out;
}

std::vector<float> dequantize_rows(loom_dtype type, std::span<const uint8_t> bytes, int64_t n_values) {
  check_supported(type, "dequantize_rows");
  if (n_values < 0 || dtype_row_bytes(type, n_values) != bytes.size()) {
    throw Error("dequantize_rows: " + std::to_string(bytes.size()) + " bytes do not hold " +
                std::to_string(n_values) + " " + dtype_name(type) + " values");
  }
  std::vector<float> out(static_cast<size_t>(n_values));
  const uint8_t* src = bytes.data();
  if (type == LOOM_DTYPE_F32) {
    std::memcpy(out.data(), src, bytes.size());
  } else if (type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_BF16) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = type == LOOM_DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  } else if (type == LOOM_DTYPE_Q8_0) {
    for (size_t b = 0; b < out.size() / 32; ++b) {
      loom_block_q8_0 block;
      std::memcpy(&block, src + sizeof block * b, sizeof block);
      const float d = f16_to_f32(block.d);
      for (int j = 0; j < 32; ++j) out[32 * b + j] = d * block.qs[j];
    }
  } else if (type == LOOM_DTYPE_MXFP4) {
    for (size_t b = 0; b < out.size() / 32; ++b) {
      loom_block_mxfp4 block;
      std::memcpy(&block, src + sizeof block * b, sizeof block);
      const float d = mxfp4_half_scale(block.e);
      for (int j = 0; j < 16; ++j) {
        out[32 * b + j] = kMxfp4Values[block.qs[j] & 0x0f] * d;
        out[32 * b + j + 16] = kMxfp4Values[block.qs[j] >> 4] * d;
      }
    }
  } else {
    for (size_t b = 0; b < out.size() / 32; ++b) {
      loom_block_q4_0 block;
      std::memcpy(&block, src + sizeof block * b, sizeof block);
      const float d = f16_to_f32(block.d);
      for (int j = 0; j < 16; ++j) {
        out[32 * b + j] = d * static_cast<float>((block.qs[j] & 0x0f) - 8);
        out[32 * b + j + 16] = d * static_cast<float>((block.qs[j] >> 4) - 8);
      }
    }
  }
  return out;
}

}  // namespace loom
