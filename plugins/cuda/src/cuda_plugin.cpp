// The plugin's ABI edge: loom_plugin_query, the loom_backend_i table, buffers, streams and copies.
// Every slot catches every exception and turns it into a status plus a last_error message.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <unordered_map>

#include "flat_json.h"
#include "cuda_stream.h"
#include "device_memory.h"
#include "kernels.h"
#include "loom/loom.h"
#include "op_dispatch.h"
#include "op_validation.h"

// A loom stream is a StreamState; NULL means the instance's default stream.
struct loom_stream {
  uint32_t magic;
  loom::cuda::StreamState state;
  explicit loom_stream(bool use_graphs) : magic(0x43535452u), state(use_graphs) {}
};

struct loom_backend {
  const loom_host_services* host = nullptr;
  int device = 0;
  std::string device_name;
  loom::cuda::DispatchConfig dispatch;
  bool use_graphs = true;
  std::unique_ptr<loom::cuda::DeviceAllocator> allocator;
  std::unique_ptr<loom_stream> default_stream;
  std::mutex streams_mutex;
  std::set<loom_stream*> streams;  // every live stream, the default one included
};

namespace loom::cuda {

using plugin_support::json_bool;
using plugin_support::json_int;
using plugin_support::parse_flat_json;
namespace {

thread_local std::unordered_map<const loom_backend*, std::string> t_last_error;

void set_error(loom_backend* backend, const std::string& message) { t_last_error[backend] = message; }

void write_message(char* out, uint32_t size, const std::string& message) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min<size_t>(size - 1, message.size());
  std::memcpy(out, message.data(), n);
  out[n] = '\0';
}

// Runs `f` on the instance's device and converts any exception into a status.
template <typename F>
loom_status guarded(loom_backend* backend, F&& f) {
  try {
    check_cuda(cudaSetDevice(backend->device), "cudaSetDevice");
    f();
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    set_error(backend, e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    set_error(backend, "cuda backend: out of host memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(backend, std::string("cuda backend internal error: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    set_error(backend, "cuda backend internal error: unknown exception");
    return LOOM_STATUS_INTERNAL;
  }
}

loom_stream* stream_of(loom_backend* backend, loom_stream_t* stream) {
  if (stream == nullptr) return backend->default_stream.get();
  if (stream->magic != 0x43535452u) invalid("not a live cuda backend stream");
  return stream;
}

void check_range(const loom_buffer* buffer, uint64_t offset, uint64_t size, const char* what) {
  if (buffer == nullptr || buffer->magic != kBufferMagic) invalid(std::string(what) + ": not a live cuda backend buffer");
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer->size)
    invalid(std::string(what) + ": range [" + std::to_string(offset) + ", +" + std::to_string(size) +
            ") exceeds the buffer of " + std::to_string(buffer->size) + " bytes");
}

// ---- slots ---------------------------------------------------------------------------------------

loom_status device_count(uint32_t* out_count, char* reason, uint32_t reason_size) {
  if (out_count == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n <= 0) {
    cudaGetLastError();  // not sticky, but leave no error behind for the next runtime call
    *out_count = 0;
    write_message(reason, reason_size,
                  std::string("no CUDA device: cudaGetDeviceCount returned ") +
                      (err != cudaSuccess ? std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")"
                                          : std::string("0 devices")));
    return LOOM_STATUS_OK;
  }
  *out_count = uint32_t(n);
  write_message(reason, reason_size, "");
  return LOOM_STATUS_OK;
}

loom_status device_name(uint32_t index, char* out, uint32_t size) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || index >= uint32_t(std::max(n, 0))) {
    cudaGetLastError();
    return LOOM_STATUS_NOT_FOUND;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, int(index)) != cudaSuccess) return LOOM_STATUS_DEVICE_ERROR;
  write_message(out, size, std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")");
  return LOOM_STATUS_OK;
}

loom_status create(const loom_host_services* host, const char* config_json, loom_backend_t** out, char* error,
                   uint32_t error_size) {
  if (out == nullptr) {
    write_message(error, error_size, "cuda backend: create needs an output pointer");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    // Parse first: a malformed config is the caller's error whether or not a GPU is present.
    const auto config = parse_flat_json(config_json ? config_json : "");
    auto backend = std::make_unique<loom_backend>();
    backend->host = host;
    const long long device = json_int(config, "device").value_or(0);
    const long long gemm_min = json_int(config, "gemm_min_tokens").value_or(64);
    if (gemm_min < 1) invalid("config_json: \"gemm_min_tokens\" must be >= 1, got " + std::to_string(gemm_min));
    backend->use_graphs = json_bool(config, "graphs").value_or(true);
    const long long cache_mib = json_int(config, "buffer_cache_mib").value_or(1024);
    if (cache_mib < 0) invalid("config_json: \"buffer_cache_mib\" must be >= 0");
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n <= 0) {
      cudaGetLastError();
      throw OpError(LOOM_STATUS_UNSUPPORTED, std::string("cuda backend: no CUDA device: cudaGetDeviceCount returned ") +
                                                 (err != cudaSuccess ? cudaGetErrorName(err) : "0 devices"));
    }
    if (device < 0 || device >= n)
      throw OpError(LOOM_STATUS_NOT_FOUND, "config_json: \"device\" " + std::to_string(device) + " is not in [0, " +
                                               std::to_string(n) + ")");
    backend->device = int(device);
    check_cuda(cudaSetDevice(backend->device), "cudaSetDevice");
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, backend->device), "cudaGetDeviceProperties");
    if (prop.major < 6 || (prop.major == 6 && prop.minor < 1))
      throw OpError(LOOM_STATUS_UNSUPPORTED, std::string("cuda backend: ") + prop.name + " is sm_" + std::to_string(prop.major) +
                                                 std::to_string(prop.minor) + "; the kernels need sm_61 or newer (dp4a)");
    backend->device_name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
    backend->dispatch.sm_count = prop.multiProcessorCount;
    backend->dispatch.gemm_min_tokens = gemm_min;
    backend->allocator = std::make_unique<DeviceAllocator>(uint64_t(cache_mib) << 20);
    backend->default_stream = std::make_unique<loom_stream>(backend->use_graphs);
    backend->streams.insert(backend->default_stream.get());
    *out = backend.release();
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    write_message(error, error_size, e.what());
    return e.status;
  } catch (const std::invalid_argument& e) {  // malformed config_json
    write_message(error, error_size, e.what());
    return LOOM_STATUS_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    write_message(error, error_size, std::string("cuda backend: create failed: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  }
}

void destroy(loom_backend_t* backend) {
  if (backend == nullptr) return;
  cudaSetDevice(backend->device);
  t_last_error.erase(backend);
  backend->streams.clear();
  backend->default_stream.reset();
  backend->allocator.reset();
  delete backend;
}

const char* last_error(loom_backend_t* backend) {
  const auto it = t_last_error.find(backend);
  return it == t_last_error.end() ? "" : it->second.c_str();
}

loom_status get_caps(loom_backend_t* backend, loom_backend_caps* out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    loom_backend_caps caps{};
    caps.struct_size = sizeof(caps);
    caps.host_memory = 0;
    write_message(caps.device_name, sizeof(caps.device_name), backend->device_name);
    size_t free_bytes = 0, total_bytes = 0;
    check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    caps.memory_total = total_bytes;
    caps.memory_free = free_bytes + backend->allocator->cached_bytes();
    const loom_dtype weights[] = {LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_Q4_0,   LOOM_DTYPE_Q4_1,
                                  LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q2_K,   LOOM_DTYPE_Q3_K,
                                  LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_IQ4_NL, LOOM_DTYPE_IQ4_XS};
    caps.n_weight_dtypes = uint32_t(std::size(weights));
    std::copy(std::begin(weights), std::end(weights), caps.weight_dtypes);
    const loom_dtype kv[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_INT8_KV, LOOM_DTYPE_F8_E4M3};
    caps.n_kv_dtypes = uint32_t(std::size(kv));
    std::copy(std::begin(kv), std::end(kv), caps.kv_dtypes);
    caps.max_head_dim = uint32_t(kMaxHeadDim);
    caps.max_block_size = 4096;
    const uint32_t size = std::min<uint32_t>(out->struct_size, sizeof(caps));
    if (size < sizeof(uint32_t)) invalid("get_caps: out->struct_size is too small");
    std::memcpy(reinterpret_cast<uint8_t*>(out) + 4, reinterpret_cast<const uint8_t*>(&caps) + 4, size - 4);
  });
}

loom_status supports_op(loom_backend_t* backend, const loom_op* op, char* reason, uint32_t reason_size) {
  if (op == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  (void)backend;
  try {
    resolve_op(*op, /*need_buffers=*/false);
    write_message(reason, reason_size, "");
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    write_message(reason, reason_size, e.what());
    return e.status;
  } catch (const std::exception& e) {
    write_message(reason, reason_size, e.what());
    return LOOM_STATUS_INTERNAL;
  }
}

loom_status buffer_create(loom_backend_t* backend, uint64_t size, loom_buffer_usage usage, loom_buffer_t** out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(backend, [&] {
    if (usage != LOOM_BUFFER_USAGE_WEIGHTS && usage != LOOM_BUFFER_USAGE_COMPUTE && usage != LOOM_BUFFER_USAGE_KV)
      invalid("buffer_create: unknown usage " + std::to_string(usage));
    const DeviceAllocator::Block block = backend->allocator->allocate(size, usage);
    *out = new loom_buffer{kBufferMagic, block.data, size, block.capacity, usage};
  });
}

void buffer_destroy(loom_backend_t* backend, loom_buffer_t* buffer) {
  if (backend == nullptr || buffer == nullptr) return;
  guarded(backend, [&] {
    buffer->magic = 0;
    // A cached block may be handed out again only once every stream is past the work enqueued so far.
    std::vector<cudaEvent_t> fences;
    if (buffer->usage == LOOM_BUFFER_USAGE_COMPUTE) {
      std::lock_guard lock(backend->streams_mutex);
      for (loom_stream* s : backend->streams) {
        cudaEvent_t e = nullptr;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
          cudaEventRecord(e, s->state.stream());
          fences.push_back(e);
        }
      }
    }
    backend->allocator->release({buffer->data, buffer->capacity}, buffer->usage, std::move(fences));
  });
  delete buffer;
}

loom_status stream_create(loom_backend_t* backend, loom_stream_t** out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    auto stream = std::make_unique<loom_stream>(backend->use_graphs);
    std::lock_guard lock(backend->streams_mutex);
    backend->streams.insert(stream.get());
    *out = stream.release();
  });
}

void stream_destroy(loom_backend_t* backend, loom_stream_t* stream) {
  if (backend == nullptr || stream == nullptr || stream == backend->default_stream.get()) return;
  cudaSetDevice(backend->device);
  {
    std::lock_guard lock(backend->streams_mutex);
    backend->streams.erase(stream);
  }
  stream->magic = 0;
  delete stream;
}

loom_status stream_synchronize(loom_backend_t* backend, loom_stream_t* stream) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  loom_status status = LOOM_STATUS_OK;
  const loom_status guard = guarded(backend, [&] {
    std::string message;
    status = stream_of(backend, stream)->state.synchronize(message);
    if (status != LOOM_STATUS_OK) set_error(backend, message);
  });
  return guard != LOOM_STATUS_OK ? guard : status;
}

loom_status copy_to_device(loom_backend_t* backend, loom_stream_t* stream, loom_buffer_t* dst, uint64_t dst_offset,
                           const void* src, uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    check_range(dst, dst_offset, size, "copy_to_device");
    if (size > 0 && src == nullptr) invalid("copy_to_device: src is NULL");
    stream_of(backend, stream)->state.copy_to_device(dst->data + dst_offset, src, size);
  });
}

loom_status copy_to_host(loom_backend_t* backend, loom_stream_t* stream, void* dst, loom_buffer_t* src,
                         uint64_t src_offset, uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    check_range(src, src_offset, size, "copy_to_host");
    if (size > 0 && dst == nullptr) invalid("copy_to_host: dst is NULL");
    stream_of(backend, stream)->state.copy_to_host(dst, src->data + src_offset, size);
  });
}

loom_status copy_buffer(loom_backend_t* backend, loom_stream_t* stream, loom_buffer_t* dst, uint64_t dst_offset,
                        loom_buffer_t* src, uint64_t src_offset, uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    check_range(dst, dst_offset, size, "copy_buffer (dst)");
    check_range(src, src_offset, size, "copy_buffer (src)");
    if (size > 0)
      check_cuda(cudaMemcpyAsync(dst->data + dst_offset, src->data + src_offset, size, cudaMemcpyDeviceToDevice,
                                 stream_of(backend, stream)->state.stream()),
                 "cudaMemcpyAsync (device to device)");
  });
}

loom_status run_ops(loom_backend_t* backend, loom_stream_t* stream, const loom_op* ops, uint32_t n_ops) {
  if (backend == nullptr || (ops == nullptr && n_ops > 0)) return LOOM_STATUS_INVALID_ARGUMENT;
  if (n_ops == 0) return LOOM_STATUS_OK;
  return guarded(backend, [&] { run_op_list(stream_of(backend, stream)->state, ops, n_ops, backend->dispatch); });
}

const loom_backend_i kTable = {
    sizeof(loom_backend_i), 0,          device_count,  device_name,        create,        destroy,
    last_error,             get_caps,   supports_op,   buffer_create,      buffer_destroy, nullptr,
    stream_create,          stream_destroy, stream_synchronize, copy_to_device, copy_to_host, copy_buffer,
    run_ops,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc), LOOM_ABI_MAJOR, LOOM_ABI_MINOR, LOOM_PLUGIN_KIND_BACKEND, "cuda", LOOM_CUDA_VERSION,
    "CUDA backend: quantized mat-vec, cuBLAS GEMM, paged flash-decoding, CUDA graphs", &kTable,
};

}  // namespace
}  // namespace loom::cuda

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::cuda::kDesc;
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
