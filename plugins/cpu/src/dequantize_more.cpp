#include "dequantize_more.h"

#include "cpu_tensor.h"
#include "fp8_e4m3.h"
#include "ggml_blocks.h"
#include "mxfp4_decode.h"

namespace loom::cpu {

using plugin_support::e4m3_table;

namespace {


void q4_1(const BlockQ4_1* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; i++, b++, y += 32) {
    const float d = half_to_float(b->d), m = half_to_float(b->m);
    for (int j = 0; j < 16; j++) {
      y[j] = float(b->qs[j] & 0xF) * d + m;
      y[j + 16] = float(b->qs[j] >> 4) * d + m;
    }
  }
}

void q5_1(const BlockQ5_1* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; i++, b++, y += 32) {
    const float d = half_to_float(b->d), m = half_to_float(b->m);
    uint32_t qh;
    std::memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; j++) {
      const uint8_t high0 = uint8_t(((qh >> j) << 4) & 0x10), high1 = uint8_t((qh >> (j + 12)) & 0x10);
      y[j] = float((b->qs[j] & 0xF) | high0) * d + m;
      y[j + 16] = float((b->qs[j] >> 4) | high1) * d + m;
    }
  }
}

void q2_k(const BlockQ2K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; i++, b++) {
    const float d = half_to_float(b->d), dmin = half_to_float(b->dmin);
    const uint8_t* q = b->qs;
    int is = 0;
    for (int half = 0; half < 2; half++, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; part++) {  // two groups of 16 per shift: q[0..15], q[16..31]
          const uint8_t sc = b->scales[is++];
          const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
          for (int l = 0; l < 16; l++) *y++ = dl * float((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void q3_k(const BlockQ3K* b, float* y, int64_t n) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  for (int64_t i = 0; i < n / 256; i++, b++) {
    const float d_all = half_to_float(b->d);
    // Unpack the sixteen 6-bit scales: low 4 bits from bytes 0-7, high 2 bits from bytes 8-11.
    uint32_t aux[4];
    std::memcpy(aux, b->scales, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    const uint8_t* q = b->qs;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < 2; half++, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
        for (int part = 0; part < 2; part++) {
          const float dl = d_all * float(scales[is++] - 32);
          for (int l = 0; l < 16; l++) {
            const int k = l + 16 * part;
            const int value = int((q[k] >> shift) & 3) - ((b->hmask[k] & m) ? 0 : 4);
            *y++ = dl * float(value);
          }
        }
      }
    }
  }
}

void q5_k(const BlockQ5K* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; i++, b++) {
    const float d = half_to_float(b->d), dmin = half_to_float(b->dmin);
    const uint8_t* ql = b->qs;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2)) {
      uint8_t sc, m;
      get_scale_min_k4(is, b->scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, b->scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; l++) *y++ = d1 * float((ql[l] & 0xF) + (b->qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * float((ql[l] >> 4) + (b->qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void iq4_nl(const BlockIQ4NL* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; i++, b++, y += 32) {
    const float d = half_to_float(b->d);
    for (int j = 0; j < 16; j++) {
      y[j] = d * float(kIq4Levels[b->qs[j] & 0xF]);
      y[j + 16] = d * float(kIq4Levels[b->qs[j] >> 4]);
    }
  }
}

void mxfp4(const BlockMXFP4* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; i++, b++, y += 32) plugin_support::mxfp4_decode_block(b->e, b->qs, y);
}

void f8_e4m3_b32(const loom_block_f8_e4m3_b32* b, float* y, int64_t n) {
  const std::array<float, 256>& value = e4m3_table();
  for (int64_t i = 0; i < n / 32; i++, b++, y += 32)
    for (int j = 0; j < 32; j++) y[j] = value[b->qs[j]] * b->d;
}

void iq4_xs(const BlockIQ4XS* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; i++, b++) {
    const float d = half_to_float(b->d);
    const uint8_t* qs = b->qs;
    for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
      const float dl = d * float(iq4_xs_run_scale(*b, ib));
      for (int j = 0; j < 16; j++) {
        y[j] = dl * float(kIq4Levels[qs[j] & 0xF]);
        y[j + 16] = dl * float(kIq4Levels[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace

ExtraLayout extra_layout(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_Q4_1: return {32, sizeof(BlockQ4_1)};
    case LOOM_DTYPE_Q5_1: return {32, sizeof(BlockQ5_1)};
    case LOOM_DTYPE_Q2_K: return {256, sizeof(BlockQ2K)};
    case LOOM_DTYPE_Q3_K: return {256, sizeof(BlockQ3K)};
    case LOOM_DTYPE_Q5_K: return {256, sizeof(BlockQ5K)};
    case LOOM_DTYPE_IQ4_NL: return {32, sizeof(BlockIQ4NL)};
    case LOOM_DTYPE_IQ4_XS: return {256, sizeof(BlockIQ4XS)};
    case LOOM_DTYPE_MXFP4: return {32, sizeof(BlockMXFP4)};
    case LOOM_DTYPE_F8_E4M3_B32: return {32, sizeof(loom_block_f8_e4m3_b32)};
    default: return {0, 0};
  }
}

bool dequantize_extra(loom_dtype type, const void* row, float* out, int64_t n) {
  switch (type) {
    case LOOM_DTYPE_Q4_1: q4_1(static_cast<const BlockQ4_1*>(row), out, n); return true;
    case LOOM_DTYPE_Q5_1: q5_1(static_cast<const BlockQ5_1*>(row), out, n); return true;
    case LOOM_DTYPE_Q2_K: q2_k(static_cast<const BlockQ2K*>(row), out, n); return true;
    case LOOM_DTYPE_Q3_K: q3_k(static_cast<const BlockQ3K*>(row), out, n); return true;
    case LOOM_DTYPE_Q5_K: q5_k(static_cast<const BlockQ5K*>(row), out, n); return true;
    case LOOM_DTYPE_IQ4_NL: iq4_nl(static_cast<const BlockIQ4NL*>(row), out, n); return true;
    case LOOM_DTYPE_IQ4_XS: iq4_xs(static_cast<const BlockIQ4XS*>(row), out, n); return true;
    case LOOM_DTYPE_MXFP4: mxfp4(static_cast<const BlockMXFP4*>(row), out, n); return true;
    case LOOM_DTYPE_F8_E4M3_B32: f8_e4m3_b32(static_cast<const loom_block_f8_e4m3_b32*>(row), out, n); return true;
    default: return false;
  }
}

}  // namespace loom::cpu
