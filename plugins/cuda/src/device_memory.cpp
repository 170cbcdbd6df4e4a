#include "device_memory.h"

#include <algorithm>

namespace loom::cuda {

DeviceAllocator::~DeviceAllocator() { trim(); }

uint64_t DeviceAllocator::size_class(uint64_t size) {
  // Round to 256 B, then to a quarter of the next power of two: at most 25% slack, few classes.
  size = std::max<uint64_t>(256, (size + 255) & ~uint64_t(255));
  uint64_t p = 256;
  while (p < size) p <<= 1;
  const uint64_t quarter = std::max<uint64_t>(256, p / 4);
  return (size + quarter - 1) / quarter * quarter;
}

DeviceAllocator::Block DeviceAllocator::allocate(uint64_t size, loom_buffer_usage usage) {
  if (usage == LOOM_BUFFER_USAGE_COMPUTE) {
    const uint64_t want = size_class(size);
    std::unique_lock lock(mutex_);
    // Reuse a cached block of this class or up to twice as large.
    auto it = cache_.lower_bound(want);
    if (it != cache_.end() && it->first <= 2 * want) {
      Cached cached = std::move(it->second);
      const uint64_t capacity = it->first;
      cache_.erase(it);
      cached_ -= capacity;
      lock.unlock();
      for (cudaEvent_t e : cached.fences) {
        cudaEventSynchronize(e);
        cudaEventDestroy(e);
      }
      return {cached.data, capacity};
    }
    lock.unlock();
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, want);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error and retry after dropping the cache
      trim();
      err = cudaMalloc(&p, want);
    }
    check_cuda(err, "cudaMalloc (compute buffer)");
    return {static_cast<uint8_t*>(p), want};
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, std::max<uint64_t>(size, 256));
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    trim();
    err = cudaMalloc(&p, std::max<uint64_t>(size, 256));
  }
  check_cuda(err, usage == LOOM_BUFFER_USAGE_KV ? "cudaMalloc (KV pool)" : "cudaMalloc (weights)");
  return {static_cast<uint8_t*>(p), std::max<uint64_t>(size, 256)};
}

void DeviceAllocator::release(Block block, loom_buffer_usage usage, std::vector<cudaEvent_t> fences) {
  if (block.data == nullptr) return;
  if (usage == LOOM_BUFFER_USAGE_COMPUTE) {
    std::lock_guard lock(mutex_);
    if (cached_ + block.capacity <= max_cached_) {
      cache_.emplace(block.capacity, Cached{block.data, std::move(fences)});
      cached_ += block.capacity;
      return;
    }
  }
  // cudaFree waits for the device to stop using the memory, so no fence is needed.
  for (cudaEvent_t e : fences) cudaEventDestroy(e);
  cudaFree(block.data);
}

void DeviceAllocator::trim() {
  std::multimap<uint64_t, Cached> drop;
  {
    std::lock_guard lock(mutex_);
    drop.swap(cache_);
    cached_ = 0;
  }
  for (auto& [capacity, cached] : drop) {
    for (cudaEvent_t e : cached.fences) cudaEventDestroy(e);
    cudaFree(cached.data);
  }
}

uint64_t DeviceAllocator::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_;
}

PinnedArena::~PinnedArena() {
  for (const Chunk& c : chunks_) cudaFreeHost(c.data);
}

uint8_t* PinnedArena::take(uint64_t size) {
  if (size > kMaxStagedCopy) return nullptr;
  size = (size + 63) & ~uint64_t(63);
  for (Chunk& c : chunks_) {
    if (c.size - c.used >= size) {
      uint8_t* p = c.data + c.used;
      c.used += size;
      return p;
    }
  }
  if ((chunks_.size() + 1) * kChunkBytes > kMaxArenaBytes) return nullptr;
  void* p = nullptr;
  if (cudaHostAlloc(&p, kChunkBytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // no pinned memory left: fall back to a direct copy
  }
  chunks_.push_back({static_cast<uint8_t*>(p), kChunkBytes, size});
  return static_cast<uint8_t*>(p);
}

void PinnedArena::reset() {
  for (Chunk& c : chunks_) c.used = 0;
}

}  // namespace loom::cuda
