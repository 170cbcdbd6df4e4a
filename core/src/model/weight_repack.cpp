#include "model/weight_repack.h"

#include <cstring>

#include "loom/dtype.h"

namespace loom {

namespace {

// GGML's Q5_0 block: 32 values (q - 16) * d with 5-bit q split into low nibbles and a high-bit mask.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

}  // namespace

void repack_q5_0_to_q8_0(std::span<const uint8_t> in, std::vector<uint8_t>& out) {
  const size_t n_blocks = in.size() / sizeof(BlockQ5_0);
  out.resize(n_blocks * sizeof(loom_block_q8_0));
  for (size_t b = 0; b < n_blocks; ++b) {
    BlockQ5_0 src;
    std::memcpy(&src, in.data() + b * sizeof(BlockQ5_0), sizeof(src));
    uint32_t qh;
    std::memcpy(&qh, src.qh, 4);
    loom_block_q8_0 dst;
    dst.d = src.d;
    for (int j = 0; j < 16; ++j) {
      const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      dst.qs[j] = static_cast<int8_t>(((src.qs[j] & 0x0F) | xh0) - 16);
      dst.qs[j + 16] = static_cast<int8_t>(((src.qs[j] >> 4) | xh1) - 16);
    }
    std::memcpy(out.data() + b * sizeof(loom_block_q8_0), &dst, sizeof(dst));
  }
}

}  // namespace loom
