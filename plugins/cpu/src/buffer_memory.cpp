// Why the pages are made present up front: the KV pool is written a token at a time, and the first
// write to each of its 4 KiB pages is a page fault inside STORE_KV. Usually that is cheap, but on the
// shared 2-core VM (memory cgroup, nested paging) one run measured 186 us per STORE_KV at batch 16
// on the default model, 8% of a decode step, against 5-6 us with the pages present (later runs:
// 5-6 us either way; memory pressure on the host is the likely cause). MAP_POPULATE makes the pages present in one call at load
// (0.12 s for a 511 MB pool; touching it page by page took a second), so decode never waits on a
// fault, and a pool larger than the memory shows at load (the kernel reclaims or refuses then), not
// in the middle of serving.
// Transparent huge pages were worse here: the first touch of 511 MB madvised MADV_HUGEPAGE took 5-6 s
// of compaction, and STORE_KV stalled on it in decode.
#include "buffer_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace loom::cpu {

namespace {

constexpr uint64_t kCacheLine = 64;
constexpr uint64_t kMapFrom = uint64_t(1) << 20;

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

uint8_t* allocate_buffer_memory(uint64_t size) {
  if (size >= kMapFrom) {
    void* data = mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (data == MAP_FAILED) throw std::bad_alloc();
    return static_cast<uint8_t*>(data);  // page-aligned, and zero
  }
  void* data = std::aligned_alloc(size_t(kCacheLine), size_t(round_up(size == 0 ? 1 : size, kCacheLine)));
  if (data == nullptr) throw std::bad_alloc();
  return static_cast<uint8_t*>(data);
}

void free_buffer_memory(uint8_t* data, uint64_t size) {
  if (size >= kMapFrom) munmap(data, size_t(size));
  else std::free(data);
}

}  // namespace loom::cpu
