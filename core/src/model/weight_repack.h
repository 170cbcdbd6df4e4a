// Lossless weight repacking for backends that lack a GGUF format.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace loom {

// GGML Q5_0 blocks (22 bytes: f16 d, 32 high bits, 16 bytes of low nibbles) -> Q8_0 blocks with the
// same d. Exact: every Q5_0 value (q - 16) * d, q in 0..31, is a Q8_0 value. `in` holds whole blocks.
void repack_q5_0_to_q8_0(std::span<const uint8_t> in, std::vector<uint8_t>& out);

}  // namespace loom
