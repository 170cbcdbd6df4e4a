// Element conversions and block decoding, written as plain loops: this is the reference decoding that
// every fast kernel is checked against.
#include "cpu_tensor.h"
#include "fp8_e4m3.h"

#include "dequantize_more.h"

#include <cstring>

#include <algorithm>
#include <cmath>

namespace loom::cpu {

using plugin_support::e4m3_table;
using plugin_support::float_to_e4m3;

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);  // inf / NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalise the mantissa into a normal float.
    int e = -1;
    do {
      e++;
      mantissa <<= 1;
    } while ((mantissa & 0x400) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return uint16_t(sign | 0x7e00 | ((abs >> 13) & 0x3ff));  // NaN stays NaN
  if (abs >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to or beyond 65520 → inf
  if (abs < 0x38800000) {
    // Result is subnormal (or zero): shift the implicit-1 mantissa and round to nearest even.
    if (abs < 0x33000000) return sign;  // below half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (112 - e) ... in 14..24
    uint32_t half_m = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half_m & 1))) half_m++;
    return uint16_t(sign | half_m);
  }
  uint32_t h = ((abs - 0x38000000) >> 13);  // rebias exponent 127 → 15
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return uint16_t(sign | h);
}

TypeLayout type_layout(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32: return {1, 4};
    case LOOM_DTYPE_I32: return {1, 4};
    case LOOM_DTYPE_F16: return {1, 2};
    case LOOM_DTYPE_BF16: return {1, 2};
    case LOOM_DTYPE_Q4_0: return {LOOM_QK4_0, sizeof(loom_block_q4_0)};
    case LOOM_DTYPE_Q5_0: return {LOOM_QK5_0, sizeof(loom_block_q5_0)};
    case LOOM_DTYPE_Q8_0: return {LOOM_QK8_0, sizeof(loom_block_q8_0)};
    case LOOM_DTYPE_Q4_K: return {LOOM_QK_K, sizeof(loom_block_q4_k)};
    case LOOM_DTYPE_Q6_K: return {LOOM_QK_K, sizeof(loom_block_q6_k)};
    case LOOM_DTYPE_INT8_KV: return {1, 1};  // int8 elements after a 4-byte scale
    case LOOM_DTYPE_F8_E4M3: return {1, 1};
    default: {
      const ExtraLayout extra = extra_layout(type);
      if (extra.block_elems > 0) return {extra.block_elems, extra.block_bytes};
      return {};
    }
  }
}

const char* dtype_name(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32: return "F32";
    case LOOM_DTYPE_F16: return "F16";
    case LOOM_DTYPE_BF16: return "BF16";
    case LOOM_DTYPE_I32: return "I32";
    case LOOM_DTYPE_Q4_0: return "Q4_0";
    case LOOM_DTYPE_Q4_1: return "Q4_1";
    case LOOM_DTYPE_Q5_0: return "Q5_0";
    case LOOM_DTYPE_Q5_1: return "Q5_1";
    case LOOM_DTYPE_Q8_0: return "Q8_0";
    case LOOM_DTYPE_Q8_1: return "Q8_1";
    case LOOM_DTYPE_Q2_K: return "Q2_K";
    case LOOM_DTYPE_Q3_K: return "Q3_K";
    case LOOM_DTYPE_Q4_K: return "Q4_K";
    case LOOM_DTYPE_Q5_K: return "Q5_K";
    case LOOM_DTYPE_Q6_K: return "Q6_K";
    case LOOM_DTYPE_Q8_K: return "Q8_K";
    case LOOM_DTYPE_IQ4_NL: return "IQ4_NL";
    case LOOM_DTYPE_IQ4_XS: return "IQ4_XS";
    case LOOM_DTYPE_MXFP4: return "MXFP4";
    case LOOM_DTYPE_I8: return "I8";
    case LOOM_DTYPE_I16: return "I16";
    case LOOM_DTYPE_I64: return "I64";
    case LOOM_DTYPE_F64: return "F64";
    case LOOM_DTYPE_INT8_KV: return "INT8_KV";
    case LOOM_DTYPE_I8_ROW: return "I8_ROW";
    case LOOM_DTYPE_I4_G128: return "I4_G128";
    case LOOM_DTYPE_F8_E4M3: return "F8_E4M3";
    case LOOM_DTYPE_F8_E4M3_B32: return "F8_E4M3_B32";
    default: return "unknown";
  }
}

uint64_t row_bytes(loom_dtype type, int64_t ne0) {
  if (type == LOOM_DTYPE_INT8_KV) return 4 + uint64_t(ne0);
  const TypeLayout l = type_layout(type);
  return uint64_t(ne0 / l.block_elems) * l.block_bytes;
}

bool is_weight_dtype(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_F16:
    case LOOM_DTYPE_BF16:
    case LOOM_DTYPE_Q4_0:
    case LOOM_DTYPE_Q5_0:
    case LOOM_DTYPE_Q8_0:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q6_K: return true;
    default: return extra_layout(type).block_elems > 0;  // decoded row by row (dequantize_more.h)
  }
}

bool is_kv_dtype(loom_dtype type) {
  return type == LOOM_DTYPE_F32 || type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_INT8_KV || type == LOOM_DTYPE_Q8_0 ||
         type == LOOM_DTYPE_Q4_0 || type == LOOM_DTYPE_F8_E4M3;
}

// ---- block decoding --------------------------------------------------------------------------------

static void dequantize_q4_0(const loom_block_q4_0* blocks, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK4_0; b++, y += LOOM_QK4_0) {
    const float d = half_to_float(blocks[b].d);
    for (int j = 0; j < LOOM_QK4_0 / 2; j++) {
      y[j] = float((blocks[b].qs[j] & 0x0F) - 8) * d;
      y[j + LOOM_QK4_0 / 2] = float((blocks[b].qs[j] >> 4) - 8) * d;
    }
  }
}

static void dequantize_q5_0(const loom_block_q5_0* blocks, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK5_0; b++, y += LOOM_QK5_0) {
    const float d = half_to_float(blocks[b].d);
    uint32_t qh;
    std::memcpy(&qh, blocks[b].qh, 4);
    for (int j = 0; j < LOOM_QK5_0 / 2; j++) {
      const int lo = (blocks[b].qs[j] & 0x0F) | int(((qh >> j) & 1u) << 4);
      const int hi = (blocks[b].qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
      y[j] = float(lo - 16) * d;
      y[j + LOOM_QK5_0 / 2] = float(hi - 16) * d;
    }
  }
}

static void dequantize_q8_0(const loom_block_q8_0* blocks, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK8_0; b++, y += LOOM_QK8_0) {
    const float d = half_to_float(blocks[b].d);
    for (int j = 0; j < LOOM_QK8_0; j++) y[j] = float(blocks[b].qs[j]) * d;
  }
}

// 256 values = 8 sub-blocks of 32, each with a 6-bit scale and min: y = d*sc*q - dmin*m.
static void dequantize_q4_k(const loom_block_q4_k* blocks, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
    const loom_block_q4_k& blk = blocks[b];
    const float d = half_to_float(blk.d);
    const float dmin = half_to_float(blk.dmin);
    const uint8_t* q = blk.qs;
    for (int sub = 0; sub < 8; sub += 2, q += 32) {  // 64 values per pass: low nibbles, then high
      uint8_t sc, m;
      get_scale_min_k4(sub, blk.scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(sub + 1, blk.scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; l++) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

// 256 values = 16 sub-blocks of 16 with int8 scales; 6-bit quants split into 4 low + 2 high bits.
static void dequantize_q6_k(const loom_block_q6_k* blocks, float* y, int64_t n) {
  for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
    const loom_block_q6_k& blk = blocks[b];
    const float d = half_to_float(blk.d);
    const uint8_t* ql = blk.ql;
    const uint8_t* qh = blk.qh;
    const int8_t* sc = blk.scales;
    for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int q1 = int((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * float(q1);
        y[l + 32] = d * sc[is + 2] * float(q2);
        y[l + 64] = d * sc[is + 4] * float(q3);
        y[l + 96] = d * sc[is + 6] * float(q4);
      }
    }
  }
}

void dequantize_row(loom_dtype type, const void* row, float* out, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_F32: std::memcpy(out, row, size_t(n) * 4); return;
    case LOOM_DTYPE_F16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; i++) out[i] = half_to_float(h[i]);
      return;
    }
    case LOOM_DTYPE_BF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; i++) out[i] = bf16_to_float(h[i]);
      return;
    }
    case LOOM_DTYPE_Q4_0: dequantize_q4_0(static_cast<const loom_block_q4_0*>(row), out, n); return;
    case LOOM_DTYPE_Q5_0: dequantize_q5_0(static_cast<const loom_block_q5_0*>(row), out, n); return;
    case LOOM_DTYPE_Q8_0: dequantize_q8_0(static_cast<const loom_block_q8_0*>(row), out, n); return;
    case LOOM_DTYPE_Q4_K: dequantize_q4_k(static_cast<const loom_block_q4_k*>(row), out, n); return;
    case LOOM_DTYPE_Q6_K: dequantize_q6_k(static_cast<const loom_block_q6_k*>(row), out, n); return;
    case LOOM_DTYPE_INT8_KV: {
      float scale;
      std::memcpy(&scale, row, 4);
      const auto* q = static_cast<const int8_t*>(row) + 4;
      for (int64_t i = 0; i < n; i++) out[i] = float(q[i]) * scale;
      return;
    }
    case LOOM_DTYPE_F8_E4M3: {
      const auto& table = e4m3_table();
      const auto* q = static_cast<const uint8_t*>(row);
      for (int64_t i = 0; i < n; i++) out[i] = table[q[i]];
      return;
    }
    default:
      if (!dequantize_extra(type, row, out, n)) unsupported(std::string("cannot decode dtype ") + dtype_name(type));
  }
}

namespace {

// Q8_0 as ggml's reference quantizer writes it: per 32 values, d = amax / 127 (f16) and rounded quants.
void quantize_row_q8_0_kv(const float* x, void* row, int64_t n) {
  auto* blocks = static_cast<loom_block_q8_0*>(row);
  for (int64_t b = 0; b < n / LOOM_QK8_0; b++, x += LOOM_QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < LOOM_QK8_0; j++) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_half(d);
    for (int j = 0; j < LOOM_QK8_0; j++) blocks[b].qs[j] = int8_t(std::lrintf(x[j] * inv));
  }
}

// Q4_0 as ggml's reference quantizer writes it: d = (the value of largest magnitude) / -8, so that value
// lands exactly on -8 and the rest on [-8, 7]; element j in the low nibble of qs[j], j + 16 in the high.
void quantize_row_q4_0_kv(const float* x, void* row, int64_t n) {
  auto* blocks = static_cast<loom_block_q4_0*>(row);
  for (int64_t b = 0; b < n / LOOM_QK4_0; b++, x += LOOM_QK4_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < LOOM_QK4_0; j++) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = float_to_half(d);
    for (int j = 0; j < LOOM_QK4_0 / 2; j++) {
      const auto lo = uint8_t(std::min(15.0f, x[j] * inv + 8.5f));
      const auto hi = uint8_t(std::min(15.0f, x[j + LOOM_QK4_0 / 2] * inv + 8.5f));
      blocks[b].qs[j] = uint8_t(lo | (hi << 4));
    }
  }
}

}  // namespace

void quantize_kv_row(loom_dtype type, const float* x, void* row, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_Q8_0: return quantize_row_q8_0_kv(x, row, n);
    case LOOM_DTYPE_Q4_0: return quantize_row_q4_0_kv(x, row, n);
    case LOOM_DTYPE_F8_E4M3: {
      auto* q = static_cast<uint8_t*>(row);
      for (int64_t i = 0; i < n; i++) q[i] = float_to_e4m3(x[i]);
      return;
    }
    default: return quantize_row_int8_kv(x, row, n);
  }
}

void quantize_row_int8_kv(const float* x, void* row, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; i++) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  std::memcpy(row, &scale, 4);
  auto* q = static_cast<int8_t*>(row) + 4;
  for (int64_t i = 0; i < n; i++) q[i] = int8_t(std::lrintf(std::clamp(x[i] * inv, -127.0f, 127.0f)));
}

float activation_value(loom_activation act, float x) {
  switch (act) {
    case LOOM_ACTIVATION_SILU: return x / (1.0f + std::exp(-x));
    case LOOM_ACTIVATION_GELU_TANH: {
      const float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case LOOM_ACTIVATION_GELU_ERF: return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    case LOOM_ACTIVATION_RELU: return x > 0.0f ? x : 0.0f;
    case LOOM_ACTIVATION_SIGMOID: return 1.0f / (1.0f + std::exp(-x));
    case LOOM_ACTIVATION_SOFTPLUS: return x > 20.0f ? x : std::log(1.0f + std::exp(x));  // as ggml writes it
    case LOOM_ACTIVATION_GELU_QUICK: return x / (1.0f + std::exp(-1.702f * x));
    default: return x;
  }
}

float glu_value(loom_activation act, float g, float u) {
  if (act != LOOM_ACTIVATION_SWIGLU_OAI) return activation_value(act, g) * u;
  const float x = std::min(g, 7.0f), y = std::clamp(u, -7.0f, 7.0f);
  return x / (1.0f + std::exp(-1.702f * x)) * (y + 1.0f);
}

}  // namespace loom::cpu
