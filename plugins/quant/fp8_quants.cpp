// FP8 weights with a float scale per block of 32 (LOOM_DTYPE_F8_E4M3_B32), the layout the FP8
// checkpoints' layers load into. Quantizing maps each block's largest magnitude to E4M3's largest
// finite value (448) and rounds every value to the nearest E4M3 code, ties to even.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats.h"
#include "fp8_e4m3.h"

namespace loom::quant {

bool quantize_row_f8_e4m3_b32(const float* x, uint8_t* dst, int64_t n, const float*) {
  for (int64_t b = 0; b < n / LOOM_QK_F8_E4M3_B32; ++b, x += LOOM_QK_F8_E4M3_B32) {
    float amax = 0.0f;
    for (int j = 0; j < LOOM_QK_F8_E4M3_B32; ++j) amax = std::max(amax, std::fabs(x[j]));
    if (!std::isfinite(amax)) return false;
    loom_block_f8_e4m3_b32 block{};
    block.d = amax / 448.0f;
    const float inverse = block.d > 0.0f ? 1.0f / block.d : 0.0f;
    for (int j = 0; j < LOOM_QK_F8_E4M3_B32; ++j) block.qs[j] = plugin_support::float_to_e4m3(x[j] * inverse);
    std::memcpy(dst + b * sizeof block, &block, sizeof block);
  }
  return true;
}

void dequantize_row_f8_e4m3_b32(const uint8_t* src, float* y, int64_t n) {
  const auto& value = plugin_support::e4m3_table();
  for (int64_t b = 0; b < n / LOOM_QK_F8_E4M3_B32; ++b, y += LOOM_QK_F8_E4M3_B32) {
    loom_block_f8_e4m3_b32 block;
    std::memcpy(&block, src + b * sizeof block, sizeof block);
    for (int j = 0; j < LOOM_QK_F8_E4M3_B32; ++j) y[j] = value[block.qs[j]] * block.d;
  }
}

}  // namespace loom::quant
