// The plugin's ABI edge: loom_plugin_query, the loom_backend_i table, buffers, streams and copies.
// Every slot catches every exception and turns it into a status plus a last_error message.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "flat_json.h"
#include "loom/loom.h"
#include "vk_stream.h"
#include "vk_tensor.h"

// One device: the Vulkan context and the default stream.
struct loom_backend {
  const loom_host_services* host = nullptr;
  std::unique_ptr<loom::vk::Context> ctx;
  std::unique_ptr<loom::vk::Stream> default_stream;
};

struct loom_stream {
  uint32_t magic;
  std::unique_ptr<loom::vk::Stream> stream;
};

namespace loom::vk {

using plugin_support::json_bool;
using plugin_support::json_int;
using plugin_support::parse_flat_json;
using plugin_support::json_string;
namespace {

constexpr uint32_t kStreamMagic = 0x4c565354u;

thread_local std::unordered_map<const loom_backend*, std::string> t_last_error;

void set_error(loom_backend* backend, const std::string& message) { t_last_error[backend] = message; }

void write_message(char* out, uint32_t size, const std::string& message) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min<size_t>(size - 1, message.size());
  std::memcpy(out, message.data(), n);
  out[n] = '\0';
}

// Runs `f` and converts any exception into a status; the message goes to last_error.
template <typename F>
loom_status guarded(loom_backend* backend, const std::string& prefix, F&& f) {
  try {
    f();
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    set_error(backend, prefix + e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    set_error(backend, prefix + "vulkan backend: out of host memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(backend, prefix + "vulkan backend internal error: " + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    set_error(backend, prefix + "vulkan backend internal error: unknown exception");
    return LOOM_STATUS_INTERNAL;
  }
}

Stream& stream_of(loom_backend* backend, loom_stream* stream) {
  if (stream == nullptr) return *backend->default_stream;
  if (stream->magic != kStreamMagic) invalid("not a live vulkan backend stream");
  return *stream->stream;
}

void check_range(const loom_buffer* buffer, uint64_t offset, uint64_t size, const char* what) {
  if (buffer == nullptr || buffer->magic != kBufferMagic) invalid(std::string(what) + ": not a live vulkan backend buffer");
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer->size)
    invalid(std::string(what) + ": range [" + std::to_string(offset) + ", +" + std::to_string(size) + ") exceeds the buffer of " +
            std::to_string(buffer->size) + " bytes");
}

// Device names, listed once per process (creating an instance costs milliseconds).
const std::vector<std::string>& devices(std::string* reason) {
  static std::once_flag once;
  static std::vector<std::string> names;
  static std::string why;
  std::call_once(once, [] {
    try {
      names = list_devices(&why);
    } catch (...) {
      why = "listing Vulkan devices failed";
    }
  });
  if (reason) *reason = why;
  return names;
}

// ---- slots ---------------------------------------------------------------------------------------

loom_status device_count(uint32_t* out_count, char* reason, uint32_t reason_size) {
  if (out_count == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  std::string why;
  *out_count = uint32_t(devices(&why).size());
  write_message(reason, reason_size, *out_count == 0 ? why : "");
  return LOOM_STATUS_OK;
}

loom_status device_name(uint32_t index, char* out, uint32_t size) {
  const auto& names = devices(nullptr);
  if (index >= names.size()) return LOOM_STATUS_NOT_FOUND;
  write_message(out, size, names[index]);
  return LOOM_STATUS_OK;
}

loom_status create(const loom_host_services* host, const char* config_json, loom_backend_t** out, char* error, uint32_t error_size) {
  if (out == nullptr) {
    write_message(error, error_size, "vulkan backend: create needs an output pointer");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    const auto config = parse_flat_json(config_json ? config_json : "");
    ContextOptions options;
    options.device_index = json_int(config, "device").value_or(-1);
    if (config.count("device") && options.device_index < 0) invalid("config_json: \"device\" must be >= 0");
    options.device_name = json_string(config, "device_name").value_or("");
    options.allow_subgroups = json_bool(config, "subgroups").value_or(true);
    options.allow_host_visible = json_bool(config, "host_visible").value_or(true);
    const std::string matvec = json_string(config, "matvec").value_or("auto");
    if (matvec == "auto") options.matvec = MatvecLayout::automatic;
    else if (matvec == "invocation") options.matvec = MatvecLayout::invocation;
    else if (matvec == "subgroup") options.matvec = MatvecLayout::subgroup;
    else if (matvec == "workgroup") options.matvec = MatvecLayout::workgroup;
    else invalid("config_json: \"matvec\" must be \"auto\", \"invocation\", \"subgroup\" or \"workgroup\", not \"" + matvec + "\"");
    auto backend = std::make_unique<loom_backend>();
    backend->host = host;
    backend->ctx = std::make_unique<Context>(options);
    backend->default_stream = std::make_unique<Stream>(*backend->ctx);
    *out = backend.release();
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    write_message(error, error_size, e.what());
    return e.status;
  } catch (const std::invalid_argument& e) {  // malformed config_json
    write_message(error, error_size, e.what());
    return LOOM_STATUS_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    write_message(error, error_size, std::string("vulkan backend: create failed: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    write_message(error, error_size, "vulkan backend: create failed");
    return LOOM_STATUS_INTERNAL;
  }
}

void destroy(loom_backend_t* backend) {
  if (backend == nullptr) return;
  t_last_error.erase(backend);
  try {
    backend->default_stream.reset();
  } catch (...) {
  }
  delete backend;
}

const char* last_error(loom_backend_t* backend) {
  const auto it = t_last_error.find(backend);
  return it == t_last_error.end() ? "" : it->second.c_str();
}

loom_status get_caps(loom_backend_t* backend, loom_backend_caps* out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, "", [&] {
    loom_backend_caps caps{};
    caps.struct_size = sizeof(caps);
    caps.host_memory = 0;
    write_message(caps.device_name, sizeof(caps.device_name), "Vulkan: " + backend->ctx->name());
    caps.memory_total = backend->ctx->memory_total();
    caps.memory_free = 0;
    const loom_dtype weights[] = {LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_Q4_0,   LOOM_DTYPE_Q4_1,
                                  LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q2_K,   LOOM_DTYPE_Q3_K,
                                  LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_IQ4_NL, LOOM_DTYPE_IQ4_XS,
                                  LOOM_DTYPE_MXFP4, LOOM_DTYPE_F8_E4M3_B32};
    caps.n_weight_dtypes = uint32_t(std::size(weights));
    std::copy(std::begin(weights), std::end(weights), caps.weight_dtypes);
    const loom_dtype kv[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_INT8_KV, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0,
                             LOOM_DTYPE_F8_E4M3};
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
  (void)usage;
  *out = nullptr;
  return guarded(backend, "buffer_create: ", [&] {
    if (size > (uint64_t(1) << 44)) throw OpError(LOOM_STATUS_OUT_OF_MEMORY, "vulkan backend: buffer of " + std::to_string(size) + " bytes is too large");
    MemoryBlock block = backend->ctx->allocate_device(size);
    *out = new loom_buffer{kBufferMagic, block, size};
  });
}

void buffer_destroy(loom_backend_t* backend, loom_buffer_t* buffer) {
  if (backend == nullptr || buffer == nullptr) return;
  buffer->magic = 0;
  backend->ctx->free(buffer->block);
  delete buffer;
}

loom_status stream_create(loom_backend_t* backend, loom_stream_t** out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, "stream_create: ", [&] {
    auto s = std::make_unique<loom_stream>();
    s->magic = kStreamMagic;
    s->stream = std::make_unique<Stream>(*backend->ctx);
    *out = s.release();
  });
}

void stream_destroy(loom_backend_t*, loom_stream_t* stream) {
  if (stream == nullptr) return;
  stream->magic = 0;
  delete stream;
}

loom_status stream_synchronize(loom_backend_t* backend, loom_stream_t* stream) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, "", [&] { stream_of(backend, stream).synchronize(); });
}

loom_status copy_to_device(loom_backend_t* backend, loom_stream_t* stream, loom_buffer_t* dst, uint64_t dst_offset, const void* src,
                           uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, "", [&] {
    check_range(dst, dst_offset, size, "copy_to_device");
    if (size > 0 && src == nullptr) invalid("copy_to_device: src is NULL");
    Stream& s = stream_of(backend, stream);
    // Mapped memory and nothing queued before this copy: write it now.
    if (dst->block.mapped != nullptr && s.is_idle()) std::memcpy(dst->block.mapped + dst_offset, src, size);
    else s.upload(dst->block, dst_offset, src, size);
  });
}

loom_status copy_to_host(loom_backend_t* backend, loom_stream_t* stream, void* dst, loom_buffer_t* src, uint64_t src_offset,
                         uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, "", [&] {
    check_range(src, src_offset, size, "copy_to_host");
    if (size > 0 && dst == nullptr) invalid("copy_to_host: dst is NULL");
    Stream& s = stream_of(backend, stream);
    if (src->block.mapped != nullptr && s.is_idle()) std::memcpy(dst, src->block.mapped + src_offset, size);
    else s.download(dst, src->block, src_offset, size);
  });
}

loom_status copy_buffer(loom_backend_t* backend, loom_stream_t* stream, loom_buffer_t* dst, uint64_t dst_offset, loom_buffer_t* src,
                        uint64_t src_offset, uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, "", [&] {
    check_range(dst, dst_offset, size, "copy_buffer (dst)");
    check_range(src, src_offset, size, "copy_buffer (src)");
    Stream& s = stream_of(backend, stream);
    if (dst->block.mapped != nullptr && src->block.mapped != nullptr && s.is_idle())
      std::memmove(dst->block.mapped + dst_offset, src->block.mapped + src_offset, size);
    else s.copy(dst->block, dst_offset, src->block, src_offset, size);
  });
}

loom_status run_ops(loom_backend_t* backend, loom_stream_t* stream, const loom_op* ops, uint32_t n_ops) {
  if (backend == nullptr || (ops == nullptr && n_ops > 0)) return LOOM_STATUS_INVALID_ARGUMENT;
  uint32_t index = 0;
  Stream* s = nullptr;
  const loom_status st = guarded(backend, "", [&] {
    s = &stream_of(backend, stream);
    for (; index < n_ops; index++) {
      try {
        record_op(*backend->ctx, *s, resolve_op(ops[index], /*need_buffers=*/true));
      } catch (const OpError& e) {
        throw OpError(e.status, "op " + std::to_string(index) + ": " + e.what());
      }
    }
    s->submit();
  });
  // Ops recorded before a failing one stay enqueued, as the contract says ops run in order.
  if (st != LOOM_STATUS_OK && s != nullptr) {
    try {
      s->submit();
    } catch (...) {
    }
  }
  return st;
}

const loom_backend_i kTable = {
    sizeof(loom_backend_i), 0,          device_count,  device_name,   create,         destroy,
    last_error,             get_caps,   supports_op,   buffer_create, buffer_destroy, nullptr,
    stream_create,          stream_destroy, stream_synchronize, copy_to_device, copy_to_host, copy_buffer,
    run_ops,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc), LOOM_ABI_MAJOR, LOOM_ABI_MINOR, LOOM_PLUGIN_KIND_BACKEND, "vulkan", LOOM_VULKAN_VERSION,
    "Vulkan compute backend (GLSL compute shaders, paged attention)", &kTable,
};

}  // namespace
}  // namespace loom::vk

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::vk::kDesc;
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
