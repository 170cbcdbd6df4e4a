#include "cuda_stream.h"

#include <cstring>

namespace loom::cuda {

namespace {
constexpr uint64_t kCublasWorkspaceBytes = uint64_t(32) << 20;
}

StreamState::StreamState(bool use_graphs) : use_graphs_(use_graphs) {
  try {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cublas(cublasCreate(&cublas_), "cublasCreate");
    check_cublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
    // A fixed workspace keeps cuBLAS from allocating during graph capture.
    check_cuda(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes), "cudaMalloc (cuBLAS workspace)");
    check_cublas(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes), "cublasSetWorkspace");
    void* word = nullptr;
    check_cuda(cudaHostAlloc(&word, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc (error word)");
    error_word_host_ = static_cast<int*>(word);
    *error_word_host_ = kDeviceOk;
    void* dev = nullptr;
    check_cuda(cudaHostGetDevicePointer(&dev, word, 0), "cudaHostGetDevicePointer");
    error_word_dev_ = static_cast<int*>(dev);
  } catch (...) {
    release();
    throw;
  }
}

StreamState::~StreamState() { release(); }

void StreamState::release() {
  if (stream_) cudaStreamSynchronize(stream_);
  drop_graphs();
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (scratch_) cudaFree(scratch_);
  if (error_word_host_) cudaFreeHost(error_word_host_);
  if (stream_) cudaStreamDestroy(stream_);
  cublas_ = nullptr, cublas_workspace_ = nullptr, scratch_ = nullptr, error_word_host_ = nullptr, stream_ = nullptr;
}

void StreamState::drop_graphs() {
  for (GraphEntry& g : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

void StreamState::ensure_scratch(uint64_t bytes) {
  if (bytes <= scratch_size_) return;
  const uint64_t grown = std::max<uint64_t>(bytes + bytes / 4, uint64_t(1) << 20);
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (before growing scratch)");
  drop_graphs();
  if (scratch_) cudaFree(scratch_);
  scratch_ = nullptr;
  scratch_size_ = 0;
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, grown), "cudaMalloc (scratch)");
  scratch_ = static_cast<uint8_t*>(p);
  scratch_size_ = grown;
}

void StreamState::copy_to_device(uint8_t* dst, const void* src, uint64_t size) {
  if (size == 0) return;
  if (uint8_t* staged = staging_.take(size)) {
    // The host may reuse `src` as soon as we return; the staged copy makes the transfer async.
    std::memcpy(staged, src, size);
    check_cuda(cudaMemcpyAsync(dst, staged, size, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to device)");
  } else {
    check_cuda(cudaMemcpyAsync(dst, src, size, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to device)");
  }
}

void StreamState::copy_to_host(void* dst, const uint8_t* src, uint64_t size) {
  if (size == 0) return;
  if (uint8_t* staged = staging_.take(size)) {
    check_cuda(cudaMemcpyAsync(staged, src, size, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)");
    pending_.push_back({dst, staged, size});  // finished by synchronize
  } else {
    check_cuda(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)");
  }
}

StreamState::GraphEntry* StreamState::find_graph(const std::vector<uint64_t>& key) {
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->key == key) {
      graphs_.splice(graphs_.begin(), graphs_, it);  // most recently used first
      return &graphs_.front();
    }
  }
  return nullptr;
}

bool StreamState::capture(GraphEntry& entry, void (*thunk)(void*), void* launch) {
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    use_graphs_ = false;
    return false;
  }
  bool launched = true;
  try {
    thunk(launch);
  } catch (...) {
    launched = false;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  cudaGraphExec_t exec = nullptr;
  const bool ok = launched && end == cudaSuccess && graph != nullptr &&
                  cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  if (graph) cudaGraphDestroy(graph);
  if (!ok) {
    cudaGetLastError();
    if (exec) cudaGraphExecDestroy(exec);
    use_graphs_ = false;  // something in the list cannot be captured; stay eager on this stream
    drop_graphs();
    return false;
  }
  entry.exec = exec;
  return true;
}

loom_status StreamState::synchronize(std::string& message) {
  loom_status status = deferred_status_;
  message = deferred_message_;
  deferred_status_ = LOOM_STATUS_OK;
  deferred_message_.clear();
  const cudaError_t err = cudaStreamSynchronize(stream_);
  if (err != cudaSuccess && status == LOOM_STATUS_OK) {
    status = LOOM_STATUS_DEVICE_ERROR;
    message = std::string("cuda backend: work on the stream failed: ") + cudaGetErrorName(err) + " (" +
              cudaGetErrorString(err) + ")";
  }
  if (err == cudaSuccess) {
    for (const PendingHostCopy& c : pending_) std::memcpy(c.dst, c.staged, c.size);
  }
  pending_.clear();
  staging_.reset();
  const int word = *reinterpret_cast<volatile int*>(error_word_host_);
  if (word != kDeviceOk) {
    *error_word_host_ = kDeviceOk;
    if (status == LOOM_STATUS_OK) {
      status = LOOM_STATUS_INVALID_ARGUMENT;
      message = std::string("cuda backend: ") + device_error_text(word);
    }
  }
  return status;
}

}  // namespace loom::cuda
