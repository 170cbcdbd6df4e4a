// MXFP4 (gpt-oss's expert format), as ggml writes it: per block of 32 an E8M0 exponent from the
// largest magnitude (floor(log2(amax)) - 2 + 127), then each value to the nearest of the 16 E2M1
// levels (doubled, so the scale is 2^(e - 128)); the first level wins a tie, as in ggml.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "mxfp4_decode.h"

namespace loom::quant {

namespace {

using plugin_support::kMxfp4Levels;
using plugin_support::mxfp4_half_scale;

uint8_t nearest(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Levels[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Levels[i] * d - x);
    if (err < best_err) best = i, best_err = err;
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

bool quantize_row_mxfp4(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    if (!std::isfinite(amax)) return false;
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = mxfp4_half_scale(e);
    uint8_t* block = dst + b * 17;
    block[0] = e;
    for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(nearest(x[j], d) | (nearest(x[j + 16], d) << 4));
  }
  return true;
}

void dequantize_row_mxfp4(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 17, y += 32) plugin_support::mxfp4_decode_block(src[0], src + 1, y);
}

}  // namespace loom::quant
