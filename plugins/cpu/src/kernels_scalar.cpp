// Portable kernels: the same algorithms as the AVX2 file (quantized activations, integer dot
// products per block), written as scalar loops.
#include <algorithm>
#include <cmath>

#include "cpu_tensor.h"
#include "kernels.h"

#include <cstring>

namespace loom::cpu {
namespace {

void quantize_q8(const float* x, BlockQ8* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; i++) y[b].qs[i] = int8_t(std::nearbyint(x[i] * id));
    y[b].d = d;
  }
}

void quantize_q8k(const float* x, BlockQ8K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    float amax = 0.0f;
    for (int i = 0; i < 256; i++) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int g = 0; g < 16; g++) {
      int sum = 0;
      for (int i = 16 * g; i < 16 * g + 16; i++) sum += y[b].qs[i] = int8_t(std::nearbyint(x[i] * id));
      y[b].bsums[g] = int16_t(sum);
    }
    y[b].d = d;
  }
}

template <typename Act>
const Act* act_row(const void* x, size_t stride, int j) {
  return reinterpret_cast<const Act*>(static_cast<const uint8_t*>(x) + size_t(j) * stride);
}

void dot_q4_0(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* wb = static_cast<const loom_block_q4_0*>(w);
  for (int j = 0; j < n_x; j++) {
    const BlockQ8* yb = act_row<BlockQ8>(x, xs, j);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
      int isum = 0;
      for (int i = 0; i < 16; i++)
        isum += ((wb[b].qs[i] & 0xF) - 8) * yb[b].qs[i] + ((wb[b].qs[i] >> 4) - 8) * yb[b].qs[i + 16];
      sum += half_to_float(wb[b].d) * yb[b].d * float(isum);
    }
    out[j] = sum;
  }
}

void dot_q5_0(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* wb = static_cast<const loom_block_q5_0*>(w);
  for (int j = 0; j < n_x; j++) {
    const BlockQ8* yb = act_row<BlockQ8>(x, xs, j);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
      uint32_t qh;
      std::memcpy(&qh, wb[b].qh, 4);
      int isum = 0;
      for (int i = 0; i < 16; i++) {
        const int lo = ((wb[b].qs[i] & 0xF) | int(((qh >> i) & 1u) << 4)) - 16;
        const int hi = ((wb[b].qs[i] >> 4) | int(((qh >> (i + 16)) & 1u) << 4)) - 16;
        isum += lo * yb[b].qs[i] + hi * yb[b].qs[i + 16];
      }
      sum += half_to_float(wb[b].d) * yb[b].d * float(isum);
    }
    out[j] = sum;
  }
}

void dot_q8_0(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* wb = static_cast<const loom_block_q8_0*>(w);
  for (int j = 0; j < n_x; j++) {
    const BlockQ8* yb = act_row<BlockQ8>(x, xs, j);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
      int isum = 0;
      for (int i = 0; i < 32; i++) isum += wb[b].qs[i] * yb[b].qs[i];
      sum += half_to_float(wb[b].d) * yb[b].d * float(isum);
    }
    out[j] = sum;
  }
}

void dot_q4_k(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* wb = static_cast<const loom_block_q4_k*>(w);
  for (int j = 0; j < n_x; j++) {
    const BlockQ8K* yb = act_row<BlockQ8K>(x, xs, j);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; b++) {
      int sumi = 0, summ = 0;
      for (int sub = 0; sub < 8; sub++) {
        uint8_t sc, m;
        get_scale_min_k4(sub, wb[b].scales, &sc, &m);
        const uint8_t* q = wb[b].qs + 32 * (sub / 2);
        const int8_t* y = yb[b].qs + 32 * sub;
        int isum = 0;
        for (int i = 0; i < 32; i++) isum += ((sub & 1) ? (q[i] >> 4) : (q[i] & 0xF)) * y[i];
        sumi += sc * isum;
        summ += m * (yb[b].bsums[2 * sub] + yb[b].bsums[2 * sub + 1]);
      }
      sum += yb[b].d * (half_to_float(wb[b].d) * float(sumi) - half_to_float(wb[b].dmin) * float(summ));
    }
    out[j] = sum;
  }
}

void dot_q6_k(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* wb = static_cast<const loom_block_q6_k*>(w);
  for (int j = 0; j < n_x; j++) {
    const BlockQ8K* yb = act_row<BlockQ8K>(x, xs, j);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; b++) {
      int q[256];
      for (int h = 0; h < 2; h++) {
        const uint8_t* ql = wb[b].ql + 64 * h;
        const uint8_t* qh = wb[b].qh + 32 * h;
        for (int l = 0; l < 32; l++) {
          q[128 * h + l + 0] = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          q[128 * h + l + 32] = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          q[128 * h + l + 64] = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          q[128 * h + l + 96] = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        }
      }
      int sumi = 0;
      for (int g = 0; g < 16; g++) {
        int isum = 0;
        for (int i = 16 * g; i < 16 * g + 16; i++) isum += q[i] * yb[b].qs[i];
        sumi += wb[b].scales[g] * isum;
      }
      sum += half_to_float(wb[b].d) * yb[b].d * float(sumi);
    }
    out[j] = sum;
  }
}

template <typename Load>
void dot_float_rows(int64_t n, const void* x, size_t xs, int n_x, float* out, Load load) {
  for (int j = 0; j < n_x; j++) {
    const float* y = act_row<float>(x, xs, j);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += load(i) * y[i];
    out[j] = sum;
  }
}

void dot_f16(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* h = static_cast<const uint16_t*>(w);
  dot_float_rows(n, x, xs, n_x, out, [h](int64_t i) { return half_to_float(h[i]); });
}
void dot_bf16(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* h = static_cast<const uint16_t*>(w);
  dot_float_rows(n, x, xs, n_x, out, [h](int64_t i) { return bf16_to_float(h[i]); });
}
void dot_f32(int64_t n, const void* w, const void* x, size_t xs, int n_x, float* out) {
  const auto* f = static_cast<const float*>(w);
  dot_float_rows(n, x, xs, n_x, out, [f](int64_t i) { return f[i]; });
}

float vdot_f32(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
float vdot_f16(const uint16_t* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; i++) s += half_to_float(a[i]) * b[i];
  return s;
}
float vdot_i8(const int8_t* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; i++) s += float(a[i]) * b[i];
  return s;
}
void axpy_f32(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * half_to_float(x[i]);
}
void axpy_i8(float a, const int8_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * float(x[i]);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = float_to_half(x[i]);
}
void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = half_to_float(x[i]);
}

bool no_activation_row(loom_activation, const float*, const float*, float*, int64_t) { return false; }

// The decode path in portable code: one tile-of-one call per row.
template <RowDotFn Dot>
void rows_dot(int64_t n, const void* w, size_t w_stride, int64_t n_rows, const void* x, float* out) {
  for (int64_t r = 0; r < n_rows; r++) Dot(n, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, x, 0, 1, out + r);
}
#define LOOM_WEIGHT(fn) WeightKernels{fn, rows_dot<fn>}

const Kernels kScalar = {"scalar",
                         quantize_q8,
                         quantize_q8k,
                         LOOM_WEIGHT(dot_q4_0),
                         LOOM_WEIGHT(dot_q5_0),
                         LOOM_WEIGHT(dot_q8_0),
                         LOOM_WEIGHT(dot_q4_k),
                         LOOM_WEIGHT(dot_q6_k),
                         LOOM_WEIGHT(dot_f16),
                         LOOM_WEIGHT(dot_bf16),
                         LOOM_WEIGHT(dot_f32),
                         vdot_f32,
                         vdot_f16,
                         vdot_i8,
                         axpy_f32,
                         axpy_f16,
                         axpy_i8,
                         f32_to_f16,
                         f16_to_f32,
                         no_activation_row};

}  // namespace

const Kernels& scalar_kernels() { return kScalar; }

}  // namespace loom::cpu
