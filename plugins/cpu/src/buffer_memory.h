// Host memory for the CPU backend's buffers: cache-line aligned, and from 1 MiB on (weights, the KV
// pool, large activations) mapped with every page already present.
#pragma once

#include <cstdint>

namespace loom::cpu {

// Throws std::bad_alloc when the memory is not there. Never returns nullptr.
uint8_t* allocate_buffer_memory(uint64_t size);
// `size` as passed to allocate_buffer_memory.
void free_buffer_memory(uint8_t* data, uint64_t size);

}  // namespace loom::cpu
