// One loom stream: a cudaStream_t with its own cuBLAS handle and workspace, scratch arena, pinned
// staging, device-side error word and a small cache of captured CUDA graphs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <list>
#include <type_traits>
#include <string>
#include <vector>

#include "cuda_types.h"
#include "device_memory.h"

namespace loom::cuda {

class StreamState {
 public:
  explicit StreamState(bool use_graphs);
  ~StreamState();
  StreamState(const StreamState&) = delete;
  StreamState& operator=(const StreamState&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int* error_word_device() const { return error_word_dev_; }

  // Grows the scratch arena to at least `bytes` (waits for the stream first: old scratch may be in
  // use). Growing drops every captured graph, since they point at the old arena.
  void ensure_scratch(uint64_t bytes);
  uint8_t* scratch() const { return scratch_; }
  uint64_t scratch_size() const { return scratch_size_; }

  // Enqueue host<->device copies (staged through pinned memory when small).
  void copy_to_device(uint8_t* dst, const void* src, uint64_t size);
  void copy_to_host(void* dst, const uint8_t* src, uint64_t size);

  // Runs `launch` (which enqueues every kernel of an op list) eagerly, or replays / captures a CUDA
  // graph when `key` matches an op list seen before on this stream.
  template <typename F>
  void run(const std::vector<uint64_t>& key, F&& launch);

  // Waits for the stream, finishes deferred host copies and returns the first error of the work
  // (a CUDA error, or a data-dependent error a kernel reported), with its message.
  loom_status synchronize(std::string& message);

  uint64_t graph_launches() const { return graph_launches_; }

 private:
  struct GraphEntry {
    std::vector<uint64_t> key;
    cudaGraphExec_t exec = nullptr;  // nullptr: seen once, not captured yet
  };
  void release();
  void drop_graphs();
  GraphEntry* find_graph(const std::vector<uint64_t>& key);
  bool capture(GraphEntry& entry, void (*thunk)(void*), void* launch);

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  int* error_word_host_ = nullptr;  // mapped pinned memory, written by kernels
  int* error_word_dev_ = nullptr;
  uint8_t* scratch_ = nullptr;
  uint64_t scratch_size_ = 0;
  PinnedArena staging_;
  struct PendingHostCopy {
    void* dst;
    const uint8_t* staged;
    uint64_t size;
  };
  std::vector<PendingHostCopy> pending_;
  bool use_graphs_;
  std::list<GraphEntry> graphs_;  // most recently used first
  uint64_t graph_launches_ = 0;
  loom_status deferred_status_ = LOOM_STATUS_OK;  // an enqueue-time failure reported at synchronize
  std::string deferred_message_;
};

template <typename F>
void StreamState::run(const std::vector<uint64_t>& key, F&& launch) {
  auto thunk = [](void* f) { (*static_cast<std::remove_reference_t<F>*>(f))(); };
  if (use_graphs_) {
    if (GraphEntry* entry = find_graph(key)) {
      if (entry->exec == nullptr && !capture(*entry, thunk, &launch)) {
        launch();  // capture failed: run eagerly from now on
        return;
      }
      check_cuda(cudaGraphLaunch(entry->exec, stream_), "cudaGraphLaunch");
      graph_launches_++;
      return;
    }
    graphs_.push_front(GraphEntry{key, nullptr});
    if (graphs_.size() > 16) {
      if (graphs_.back().exec) cudaGraphExecDestroy(graphs_.back().exec);
      graphs_.pop_back();
    }
  }
  launch();
}

}  // namespace loom::cuda
