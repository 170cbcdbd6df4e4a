// The plugin's ABI edge: loom_plugin_query, the loom_backend_i table, buffers, streams and copies.
// Every slot catches every exception and turns it into a status plus a last_error message.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend_op_validation.h"
#include "buffer_memory.h"
#include "flat_json.h"
#include "fast_ops.h"
#include "loom/loom.h"
#include "op_profile.h"
#include "op_validation.h"
#include "reference_ops.h"

// Opaque handles, defined by the plugin.
struct loom_backend {
  const loom_host_services* host = nullptr;
  bool reference = false;
  std::unique_ptr<loom::cpu::FastOps> fast;  // null in reference mode
  std::unique_ptr<loom::cpu::OpProfile> profile;  // only with LOOM_CPU_PROFILE set
  std::string device_name;
  // config "without_ops": op names this instance answers UNSUPPORTED for, as a backend that lacks
  // them would (how a host's refusal of such a backend is tested without one).
  std::vector<loom_op_type> without_ops;
};

// Streams execute synchronously: every op and copy has finished when its enqueue call returns, and
// its error (if any) was returned by that call.
struct loom_stream {
  uint32_t magic;
};

namespace loom::cpu {

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

// Runs `f` and converts any exception into a status; the message goes to last_error.
template <typename F>
loom_status guarded(loom_backend* backend, F&& f) {
  try {
    f();
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    set_error(backend, e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    set_error(backend, "cpu backend: out of host memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(backend, std::string("cpu backend internal error: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    set_error(backend, "cpu backend internal error: unknown exception");
    return LOOM_STATUS_INTERNAL;
  }
}

uint64_t meminfo_kib(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t value = 0;
  std::string unit;
  while (in >> name >> value >> unit)
    if (name == key) return value;
  return 0;
}

void check_range(const loom_buffer* buffer, uint64_t offset, uint64_t size, const char* what) {
  if (buffer == nullptr || buffer->magic != kBufferMagic) invalid(std::string(what) + ": not a live cpu backend buffer");
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer->size)
    invalid(std::string(what) + ": range [" + std::to_string(offset) + ", +" + std::to_string(size) +
            ") exceeds the buffer of " + std::to_string(buffer->size) + " bytes");
}

// ---- slots ---------------------------------------------------------------------------------------

loom_status device_count(uint32_t* out_count, char* reason, uint32_t reason_size) {
  if (out_count == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_count = 1;
  write_message(reason, reason_size, "");
  return LOOM_STATUS_OK;
}

loom_status device_name(uint32_t index, char* out, uint32_t size) {
  if (index != 0) return LOOM_STATUS_NOT_FOUND;
  write_message(out, size, "cpu");
  return LOOM_STATUS_OK;
}

loom_status create(const loom_host_services* host, const char* config_json, loom_backend_t** out, char* error,
                   uint32_t error_size) {
  if (out == nullptr) {
    write_message(error, error_size, "cpu backend: create needs an output pointer");
    return LOOM_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    const auto config = parse_flat_json(config_json ? config_json : "");
    auto backend = std::make_unique<loom_backend>();
    backend->host = host;
    backend->reference = json_bool(config, "reference").value_or(false);
    const bool batch_invariant = json_bool(config, "batch_invariant").value_or(false);
    if (OpProfile::enabled_by_environment()) backend->profile = std::make_unique<OpProfile>();
    const long long hw = std::max(1u, std::thread::hardware_concurrency());
    const long long threads = json_int(config, "threads").value_or(hw);
    if (threads < 1 || threads > 1024) invalid("config_json: \"threads\" must be in [1, 1024], got " + std::to_string(threads));
    const auto simd = config.find("simd");  // "auto" (default), "avx512", "avx2" or "scalar"
    const std::string simd_level = simd == config.end() ? "auto" : simd->second;
    if (const auto without = config.find("without_ops"); without != config.end()) {
      std::istringstream names(without->second);
      for (std::string op_name; std::getline(names, op_name, ',');) {
        loom_op_type found = 0;
        for (loom_op_type t = 1; t < 64; ++t) {
          const char* known = plugin_support::op_type_name(t);
          if (known != nullptr && op_name == known) found = t;
        }
        if (found == 0) invalid("config_json: \"without_ops\" names unknown op '" + op_name + "'");
        backend->without_ops.push_back(found);
      }
    }
    std::ostringstream name;
    if (backend->reference) {
      name << "CPU reference (plain loops, 1 thread)";
    } else {
      backend->fast = std::make_unique<FastOps>(int(threads), simd_level, batch_invariant);
      name << "CPU (" << backend->fast->isa_name() << ", " << backend->fast->n_threads() << " threads"
           << (batch_invariant ? ", batch-invariant" : "") << ")";
    }
    backend->device_name = name.str();
    *out = backend.release();
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    write_message(error, error_size, e.what());
    return e.status;
  } catch (const std::invalid_argument& e) {  // malformed config_json
    write_message(error, error_size, e.what());
    return LOOM_STATUS_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    write_message(error, error_size, std::string("cpu backend: create failed: ") + e.what());
    return LOOM_STATUS_INTERNAL;
  }
}

void destroy(loom_backend_t* backend) {
  if (backend != nullptr && backend->profile) backend->profile->print();
  t_last_error.erase(backend);
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
    caps.host_memory = 1;
    write_message(caps.device_name, sizeof(caps.device_name), backend->device_name);
    caps.memory_total = meminfo_kib("MemTotal:") * 1024;
    caps.memory_free = meminfo_kib("MemAvailable:") * 1024;
    // Q4_1 to MXFP4 have no tuned kernel on every table: the fast layer decodes their rows there
    // (kernels_dequant.cpp).
    const loom_dtype weights[] = {LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16,   LOOM_DTYPE_Q4_0,  LOOM_DTYPE_Q5_0,
                                  LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K,   LOOM_DTYPE_Q4_1,  LOOM_DTYPE_Q5_1,
                                  LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K, LOOM_DTYPE_Q5_K,   LOOM_DTYPE_IQ4_NL, LOOM_DTYPE_IQ4_XS,
                                  LOOM_DTYPE_MXFP4, LOOM_DTYPE_F8_E4M3_B32};
    caps.n_weight_dtypes = uint32_t(std::size(weights));
    std::copy(std::begin(weights), std::end(weights), caps.weight_dtypes);
    const loom_dtype kv[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_INT8_KV, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0,
                             LOOM_DTYPE_F8_E4M3};
    caps.n_kv_dtypes = uint32_t(std::size(kv));
    std::copy(std::begin(kv), std::end(kv), caps.kv_dtypes);
    caps.max_head_dim = 1024;
    caps.max_block_size = 4096;
    // The reference loops are not held to it (nothing tests them for it), so only the fast layer says so.
    caps.batch_invariant = backend->fast && backend->fast->batch_invariant() ? 1 : 0;
    // Copy only what the caller's struct holds (it may be an older, smaller version).
    const uint32_t size = std::min<uint32_t>(out->struct_size, sizeof(caps));
    if (size < sizeof(uint32_t)) invalid("get_caps: out->struct_size is too small");
    std::memcpy(reinterpret_cast<uint8_t*>(out) + 4, reinterpret_cast<const uint8_t*>(&caps) + 4, size - 4);
  });
}

loom_status supports_op(loom_backend_t* backend, const loom_op* op, char* reason, uint32_t reason_size) {
  if (op == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  try {
    if (backend != nullptr && std::find(backend->without_ops.begin(), backend->without_ops.end(), op->type) != backend->without_ops.end()) {
      unsupported(std::string(plugin_support::op_type_name(op->type)) + " is switched off by this instance's config (without_ops)");
    }
    resolve_op(*op, /*need_buffers=*/false);
    write_message(reason, reason_size, "");
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    write_message(reason, reason_size, e.what());
    return e.status;
  } catch (const std::exception& e) {
    write_message(reason, reason_size, e.what());
    (void)backend;
    return LOOM_STATUS_INTERNAL;
  }
}

loom_status buffer_create(loom_backend_t* backend, uint64_t size, loom_buffer_usage, loom_buffer_t** out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(backend, [&] {
    if (size > (uint64_t(1) << 48)) throw std::bad_alloc();
    uint8_t* data = allocate_buffer_memory(size);
    *out = new loom_buffer{kBufferMagic, data, size};
  });
}

void buffer_destroy(loom_backend_t*, loom_buffer_t* buffer) {
  if (buffer == nullptr) return;
  buffer->magic = 0;
  free_buffer_memory(buffer->data, buffer->size);
  delete buffer;
}

void* buffer_host_pointer(loom_backend_t*, loom_buffer_t* buffer) { return buffer ? buffer->data : nullptr; }

loom_status stream_create(loom_backend_t* backend, loom_stream_t** out) {
  if (backend == nullptr || out == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] { *out = new loom_stream{0x5354524du}; });
}

void stream_destroy(loom_backend_t*, loom_stream_t* stream) { delete stream; }

loom_status stream_synchronize(loom_backend_t* backend, loom_stream_t*) {
  return backend == nullptr ? LOOM_STATUS_INVALID_ARGUMENT : LOOM_STATUS_OK;
}

loom_status copy_to_device(loom_backend_t* backend, loom_stream_t*, loom_buffer_t* dst, uint64_t dst_offset,
                           const void* src, uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    check_range(dst, dst_offset, size, "copy_to_device");
    if (size > 0 && src == nullptr) invalid("copy_to_device: src is NULL");
    if (size > 0) std::memcpy(dst->data + dst_offset, src, size);
  });
}

loom_status copy_to_host(loom_backend_t* backend, loom_stream_t*, void* dst, loom_buffer_t* src, uint64_t src_offset,
                         uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    check_range(src, src_offset, size, "copy_to_host");
    if (size > 0 && dst == nullptr) invalid("copy_to_host: dst is NULL");
    if (size > 0) std::memcpy(dst, src->data + src_offset, size);
  });
}

loom_status copy_buffer(loom_backend_t* backend, loom_stream_t*, loom_buffer_t* dst, uint64_t dst_offset,
                        loom_buffer_t* src, uint64_t src_offset, uint64_t size) {
  if (backend == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  return guarded(backend, [&] {
    check_range(dst, dst_offset, size, "copy_buffer (dst)");
    check_range(src, src_offset, size, "copy_buffer (src)");
    if (size > 0) std::memmove(dst->data + dst_offset, src->data + src_offset, size);
  });
}

// A group's time goes to its ops in proportion to their weight bytes (decode matmuls are memory-bound).
void record_group(OpProfile& profile, const OpArgs* group, int n, std::chrono::steady_clock::duration elapsed) {
  if (n == 1) return profile.add(group[0], elapsed);
  double total = 0, bytes[FastOps::kMaxGroup];
  for (int i = 0; i < n; i++) total += bytes[i] = double(row_bytes(group[i].src[0].dtype, group[i].src[0].ne[0])) * double(group[i].src[0].ne[1]);
  for (int i = 0; i < n; i++)
    profile.add(group[i], std::chrono::duration_cast<std::chrono::steady_clock::duration>(elapsed * (bytes[i] / total)));
}

loom_status run_ops(loom_backend_t* backend, loom_stream_t*, const loom_op* ops, uint32_t n_ops) {
  if (backend == nullptr || (ops == nullptr && n_ops > 0)) return LOOM_STATUS_INVALID_ARGUMENT;
  uint32_t index = 0;
  try {
    while (index < n_ops) {
      // The fast layer may run consecutive decode matmuls of one activation row together (and
      // mixture-of-experts matmuls of one activation and routing), so it sees the ops that could
      // join the first (a look-ahead op that fails validation just ends the
      // group; it is resolved again, and its error reported, as the op it is).
      OpArgs group[FastOps::kMaxGroup];
      const OpArgs* members[FastOps::kMaxGroup];
      group[0] = resolve_op(ops[index], /*need_buffers=*/true);
      members[0] = &group[0];
      int n = 1;
      const bool groupable = group[0].type == LOOM_OP_MATMUL || group[0].type == LOOM_OP_MOE_MATMUL;
      while (!backend->reference && groupable && n < FastOps::kMaxGroup && index + uint32_t(n) < n_ops &&
             ops[index + uint32_t(n)].type == group[0].type) {
        try {
          group[n] = resolve_op(ops[index + uint32_t(n)], /*need_buffers=*/true);
        } catch (const OpError&) {
          break;
        }
        members[n] = &group[n];
        n++;
      }
      const auto start = std::chrono::steady_clock::now();
      int ran = 1;
      if (backend->reference) run_reference_op(group[0]);
      else ran = backend->fast->run_group(members, n);
      if (backend->profile) record_group(*backend->profile, group, ran, std::chrono::steady_clock::now() - start);
      index += uint32_t(ran);
    }
    return LOOM_STATUS_OK;
  } catch (const OpError& e) {
    set_error(backend, "op " + std::to_string(index) + ": " + e.what());
    return e.status;
  } catch (const std::bad_alloc&) {
    set_error(backend, "op " + std::to_string(index) + ": cpu backend: out of host memory");
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(backend, "op " + std::to_string(index) + ": cpu backend internal error: " + e.what());
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    set_error(backend, "op " + std::to_string(index) + ": cpu backend internal error");
    return LOOM_STATUS_INTERNAL;
  }
}

loom_status get_stats(loom_backend_t* backend, char* out, uint32_t size) {
  if (backend == nullptr || out == nullptr || size == 0) return LOOM_STATUS_INVALID_ARGUMENT;
  const MoeCounters moe = backend->fast ? backend->fast->moe_counters() : MoeCounters{};
  const std::string json = "{\"moe_matmuls\": " + std::to_string(moe.ops) + ", \"moe_expert_reads\": " +
                           std::to_string(moe.expert_reads) + ", \"moe_rows\": " + std::to_string(moe.rows) + "}";
  if (json.size() + 1 > size) return LOOM_STATUS_INVALID_ARGUMENT;
  std::memcpy(out, json.c_str(), json.size() + 1);
  return LOOM_STATUS_OK;
}

const loom_backend_i kTable = {
    sizeof(loom_backend_i), 0,          device_count,  device_name,        create,        destroy,
    last_error,             get_caps,   supports_op,   buffer_create,      buffer_destroy, buffer_host_pointer,
    stream_create,          stream_destroy, stream_synchronize, copy_to_device, copy_to_host, copy_buffer,
    run_ops,                get_stats,
};

const loom_plugin_desc kDesc = {
    sizeof(loom_plugin_desc), LOOM_ABI_MAJOR, LOOM_ABI_MINOR, LOOM_PLUGIN_KIND_BACKEND, "cpu", LOOM_CPU_VERSION,
    "CPU backend: reference ops and threaded AVX2/FMA kernels", &kTable,
};

}  // namespace
}  // namespace loom::cpu

LOOM_PLUGIN_ENTRY_DECL loom_status loom_plugin_query(const loom_host_version* host, const loom_plugin_desc** out_desc) {
  if (out_desc == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  *out_desc = &loom::cpu::kDesc;  // written even on refusal, so the host can name the version we want
  if (host == nullptr || host->abi_major != LOOM_ABI_MAJOR) return LOOM_STATUS_VERSION_MISMATCH;
  return LOOM_STATUS_OK;
}
