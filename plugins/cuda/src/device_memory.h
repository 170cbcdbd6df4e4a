// Device memory for loom buffers: weights and KV pools are plain cudaMalloc allocations; compute
// buffers go through a free-list cache, because the core re-creates its activation and input
// buffers whenever a batch outgrows them and cudaMalloc/cudaFree synchronise the whole device.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_types.h"

namespace loom::cuda {

class DeviceAllocator {
 public:
  explicit DeviceAllocator(uint64_t max_cached_bytes) : max_cached_(max_cached_bytes) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  struct Block {
    uint8_t* data = nullptr;
    uint64_t capacity = 0;
  };
  // Throws OpError(OUT_OF_MEMORY). Cached blocks are reused only after the events recorded when
  // they were released have completed (work still reading them on any stream has finished).
  Block allocate(uint64_t size, loom_buffer_usage usage);
  // `fences`: one event per live stream, recorded at release; the allocator owns them afterwards.
  void release(Block block, loom_buffer_usage usage, std::vector<cudaEvent_t> fences);
  void trim();  // frees every cached block
  uint64_t cached_bytes() const;

 private:
  struct Cached {
    uint8_t* data;
    std::vector<cudaEvent_t> fences;
  };
  static uint64_t size_class(uint64_t size);
  mutable std::mutex mutex_;
  std::multimap<uint64_t, Cached> cache_;  // capacity -> block
  uint64_t cached_ = 0;
  uint64_t max_cached_;
};

// Page-locked host memory for staging copies, so copy_to_device returns before the transfer ends.
// One arena per stream, reset at stream_synchronize; chunks are kept for reuse.
class PinnedArena {
 public:
  PinnedArena() = default;
  ~PinnedArena();
  PinnedArena(const PinnedArena&) = delete;
  PinnedArena& operator=(const PinnedArena&) = delete;
  // nullptr when the request is too large for staging (the caller copies from pageable memory,
  // which the ABI allows: the host keeps it valid until synchronize).
  uint8_t* take(uint64_t size);
  void reset();  // only after the stream's work has completed

 private:
  struct Chunk {
    uint8_t* data;
    uint64_t size;
    uint64_t used;
  };
  std::vector<Chunk> chunks_;
  static constexpr uint64_t kChunkBytes = uint64_t(8) << 20;
  static constexpr uint64_t kMaxStagedCopy = uint64_t(4) << 20;   // larger copies go direct
  static constexpr uint64_t kMaxArenaBytes = uint64_t(64) << 20;
};

}  // namespace loom::cuda
