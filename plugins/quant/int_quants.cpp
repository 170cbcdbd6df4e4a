// Loom's integer formats.
//
// I8_ROW / INT8_KV: per row, one f32 scale s = amax / 127 then n int8 values q = round(x / s)
// (half to even). The f32 scale keeps the relative error independent of the magnitude.
//
// I4_G128: groups of 128 as loom_block_i4_g128, x ~ d * q + m with q in 0..15 and f16 d, m.
// Each group's (d, m) is searched: a grid of candidate steps, each refined by a weighted least-
// squares fit and scored after rounding d and m to f16 and re-quantizing, exactly as stored.
//
// Activation-aware variant (request->importance given, importance[c] ~ E[x_c^2] of the input
// activation for column c, as AWQ collects it). Real AWQ multiplies column c of W by s_c before
// quantizing and divides the activation by s_c at run time; the formats here have no place for
// s, and a scale that varies inside a 128-group cannot be folded into the group's d. So Loom uses
// the variant that needs NO change to activations: the stored weights still approximate W itself,
// and only the choice of (d, m, q) per group is activation-aware. For alpha in {0, .25, .5, .75, 1}
// the group is fitted with weights importance^alpha (AWQ's s = importance^alpha grid), and the
// candidate with the smallest importance-weighted squared error sum_c importance[c] *
// (W[r,c] - deq[r,c])^2 (the expected output error for independent activations) is kept. alpha = 0
// reproduces the plain fit, so the result is never worse than plain quantization under that metric.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "formats.h"
#include "half.h"

namespace loom::quant {

// ---- per-row int8 --------------------------------------------------------------------------------

bool quantize_row_i8_row(const float* x, uint8_t* dst, int64_t n, const float*) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  std::memcpy(dst, &scale, sizeof(scale));
  int8_t* q = reinterpret_cast<int8_t*>(dst + sizeof(scale));
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::clamp(nearest_int(x[i] * inv), -127, 127));
  return true;
}

void dequantize_row_i8_row(const uint8_t* src, float* y, int64_t n) {
  float scale;
  std::memcpy(&scale, src, sizeof(scale));
  const int8_t* q = reinterpret_cast<const int8_t*>(src + sizeof(scale));
  for (int64_t i = 0; i < n; ++i) y[i] = q[i] * scale;
}

// ---- group-wise int4 -----------------------------------------------------------------------------

namespace {

constexpr int kGroup = 128;
constexpr int kQMax = 15;

struct GroupFit {
  uint16_t d = 0;  // f16 bits
  uint16_t m = 0;
  uint8_t q[kGroup] = {};
  double error = 0;  // weighted squared error of the stored result
};

// Quantize the group against an already rounded (d, m) and score it with `score_weights`.
GroupFit settle(const float* x, float d, float m, const float* score_weights) {
  GroupFit fit;
  fit.d = fp32_to_fp16(d);
  fit.m = fp32_to_fp16(m);
  const float d16 = fp16_to_fp32(fit.d);
  const float m16 = fp16_to_fp32(fit.m);
  for (int i = 0; i < kGroup; ++i) {
    const int l = d16 != 0.0f ? nearest_int((x[i] - m16) / d16) : 0;
    fit.q[i] = static_cast<uint8_t>(std::clamp(l, 0, kQMax));
    const double diff = static_cast<double>(d16) * fit.q[i] + m16 - x[i];
    fit.error += (score_weights ? score_weights[i] : 1.0) * diff * diff;
  }
  return fit;
}

// Best (d, m) for weights `w`, scored by `score_weights` (NULL = uniform).
GroupFit fit_group(const float* x, const double* w, const float* score_weights) {
  float min = x[0], max = x[0];
  for (int i = 1; i < kGroup; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
  }
  GroupFit best = settle(x, (max - min) / kQMax, min, score_weights);  // plain min/max grid
  if (max == min) return best;
  double sum_w = 0, sum_x = 0;
  for (int i = 0; i < kGroup; ++i) {
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  // Narrower and wider grids (clipping outliers trades their error for everyone else's).
  for (int step = 0; step <= 24; ++step) {
    const double iscale = (kQMax - 1.2 + 0.1 * step) / (static_cast<double>(max) - min);
    double sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < kGroup; ++i) {
      const double l = std::clamp(std::nearbyint((x[i] - static_cast<double>(min)) * iscale), 0.0, double{kQMax});
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const double det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    const double d = (sum_w * sum_xl - sum_x * sum_l) / det;
    const double m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (!(d > 0)) continue;
    GroupFit candidate = settle(x, static_cast<float>(d), static_cast<float>(m), score_weights);
    if (candidate.error < best.error) best = candidate;
  }
  return best;
}

}  // namespace

bool quantize_row_i4_g128(const float* x, uint8_t* dst, int64_t n, const float* importance) {
  static constexpr double kAlphas[] = {0.0, 0.25, 0.5, 0.75, 1.0};
  double w[kGroup];
  for (int64_t g = 0; g < n / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    GroupFit best;
    if (importance == nullptr) {
      std::fill(std::begin(w), std::end(w), 1.0);
      best = fit_group(xg, w, nullptr);
    } else {
      const float* imp = importance + g * kGroup;
      bool has_best = false;
      for (double alpha : kAlphas) {
        for (int i = 0; i < kGroup; ++i) w[i] = std::pow(static_cast<double>(imp[i]), alpha);
        GroupFit candidate = fit_group(xg, w, imp);
        if (!has_best || candidate.error < best.error) {
          best = candidate;
          has_best = true;
        }
      }
    }
    if (!is_fp16_finite(best.d) || !is_fp16_finite(best.m)) return false;
    loom_block_i4_g128 block;
    block.d = best.d;
    block.m = best.m;
    for (int j = 0; j < kGroup / 2; ++j) block.qs[j] = static_cast<uint8_t>(best.q[j] | (best.q[j + kGroup / 2] << 4));
    std::memcpy(dst + g * sizeof(block), &block, sizeof(block));
  }
  return true;
}

void dequantize_row_i4_g128(const uint8_t* src, float* y, int64_t n) {
  for (int64_t g = 0; g < n / kGroup; ++g, y += kGroup) {
    loom_block_i4_g128 block;
    std::memcpy(&block, src + g * sizeof(block), sizeof(block));
    const float d = fp16_to_fp32(block.d);
    const float m = fp16_to_fp32(block.m);
    for (int j = 0; j < kGroup / 2; ++j) {
      y[j] = d * (block.qs[j] & 0x0F) + m;
      y[j + kGroup / 2] = d * (block.qs[j] >> 4) + m;
    }
  }
}

}  // namespace loom::quant
