#include "backend/backend.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "config/config.h"
#include "gguf/dtype_traits.h"
#include "plugin/host_services.h"
#include "plugin/table_validation.h"
#include "plugin/plugin_registry.h"

namespace loom {

// ---- Buffer --------------------------------------------------------------------------------------

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = other.backend_;
    buffer_ = other.buffer_;
    size_ = other.size_;
    other.backend_ = nullptr;
    other.buffer_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (buffer_ != nullptr && backend_ != nullptr) backend_->table_->buffer_destroy(backend_->instance_, buffer_);
  backend_ = nullptr;
  buffer_ = nullptr;
  size_ = 0;
}

// ---- Backend -------------------------------------------------------------------------------------

const char* status_name(loom_status status) {
  switch (status) {
    case LOOM_STATUS_OK: return "OK";
    case LOOM_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case LOOM_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case LOOM_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case LOOM_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case LOOM_STATUS_VERSION_MISMATCH: return "VERSION_MISMATCH";
    case LOOM_STATUS_NOT_FOUND: return "NOT_FOUND";
    case LOOM_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case LOOM_STATUS_DEVICE_ERROR: return "DEVICE_ERROR";
    case LOOM_STATUS_INTERNAL: return "INTERNAL";
    default: return "UNKNOWN_STATUS";
  }
}

std::unique_ptr<Backend> Backend::create(std::shared_ptr<LoadedPlugin> plugin, const std::string& config_json) {
  if (!plugin || plugin->backend() == nullptr) {
    throw Error("plugin '" + (plugin ? plugin->name() : std::string("<null>")) + "' is not a backend plugin");
  }
  std::unique_ptr<Backend> backend(new Backend());
  backend->table_ = plugin->backend();
  backend->name_ = plugin->name();
  backend->plugin_ = std::move(plugin);
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  const loom_status status =
      backend->table_->create(default_host_services(), config_json.c_str(), &backend->instance_, error, sizeof(error));
  if (status != LOOM_STATUS_OK || backend->instance_ == nullptr) {
    backend->instance_ = nullptr;
    throw Error("backend '" + backend->name_ + "': cannot create an instance with config " + config_json + ": " +
                (error[0] ? error : status_name(status)));
  }
  backend->caps_.struct_size = sizeof(loom_backend_caps);
  backend->check(backend->table_->get_caps(backend->instance_, &backend->caps_), "get_caps");
  return backend;
}

Backend::~Backend() {
  if (instance_ != nullptr) {
    table_->stream_synchronize(instance_, nullptr);
    table_->destroy(instance_);
  }
}

void Backend::fail(loom_status status, const std::string& what) const {
  const char* message = instance_ != nullptr ? table_->last_error(instance_) : nullptr;
  throw Error("backend '" + name_ + "': " + what + " failed (" + status_name(status) +
              "): " + (message != nullptr && message[0] ? message : "no message"));
}

uint32_t Backend::abi_minor() const { return plugin_ != nullptr ? plugin_->desc().abi_minor : LOOM_ABI_MINOR; }

bool Backend::supports_weight_dtype(loom_dtype type) const {
  const uint32_t n = std::min<uint32_t>(caps_.n_weight_dtypes, LOOM_BACKEND_MAX_DTYPES);
  return std::find(caps_.weight_dtypes, caps_.weight_dtypes + n, type) != caps_.weight_dtypes + n;
}

bool Backend::supports_kv_dtype(loom_dtype type) const {
  const uint32_t n = std::min<uint32_t>(caps_.n_kv_dtypes, 8);
  return std::find(caps_.kv_dtypes, caps_.kv_dtypes + n, type) != caps_.kv_dtypes + n;
}

Buffer Backend::alloc(uint64_t size, loom_buffer_usage usage) {
  loom_buffer_t* buffer = nullptr;
  const loom_status status = table_->buffer_create(instance_, std::max<uint64_t>(size, 1), usage, &buffer);
  if (status != LOOM_STATUS_OK || buffer == nullptr) fail(status, "allocating " + std::to_string(size) + " bytes");
  return Buffer(this, buffer, size);
}

void Backend::upload(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size) {
  if (size == 0) return;
  check(table_->copy_to_device(instance_, nullptr, dst.get(), dst_offset, src, size), "copy_to_device");
}

void Backend::copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset, uint64_t size) {
  check(table_->copy_buffer(instance_, nullptr, dst.get(), dst_offset, src.get(), src_offset, size), "copy_buffer");
}

void Backend::download(void* dst, const Buffer& src, uint64_t src_offset, uint64_t size) {
  if (size == 0) return;
  check(table_->copy_to_host(instance_, nullptr, dst, src.get(), src_offset, size), "copy_to_host");
}

void Backend::run(std::span<const loom_op> ops) {
  if (ops.empty()) return;
  check(table_->run_ops(instance_, nullptr, ops.data(), static_cast<uint32_t>(ops.size())), "run_ops");
}

void Backend::synchronize() { check(table_->stream_synchronize(instance_, nullptr), "stream_synchronize"); }

std::string Backend::unsupported_reason(const loom_op& op) const {
  if (table_->supports_op == nullptr) return "";
  char reason[512] = {};
  const loom_status status = table_->supports_op(instance_, &op, reason, sizeof(reason));
  if (status == LOOM_STATUS_OK) return "";
  return reason[0] ? reason : status_name(status);
}

std::string Backend::stats_json() const {
  const auto read_stats = LOOM_SLOT(table_, loom_backend_i, get_stats);  // absent before ABI 1.5
  if (read_stats == nullptr) return "{}";
  char out[4096] = {};
  if (read_stats(instance_, out, sizeof(out)) != LOOM_STATUS_OK) return "{}";
  return out;
}

// ---- views and ops -------------------------------------------------------------------------------

loom_tensor tensor_view_raw(loom_buffer_t* buffer, uint64_t offset, loom_dtype dtype, int64_t ne0, int64_t ne1,
                            int64_t ne2, int64_t ne3) {
  const DtypeTraits* traits = dtype_traits(dtype);
  if (traits == nullptr) throw Error("tensor view: unknown dtype " + dtype_name(dtype));
  loom_tensor t{};
  t.struct_size = sizeof(loom_tensor);
  t.dtype = dtype;
  t.buffer = buffer;
  t.offset = offset;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.ne[2] = ne2;
  t.ne[3] = ne3;
  t.nb[0] = traits->block_bytes;
  t.nb[1] = dtype_row_bytes(dtype, ne0);
  t.nb[2] = t.nb[1] * static_cast<uint64_t>(ne1);
  t.nb[3] = t.nb[2] * static_cast<uint64_t>(ne2);
  return t;
}

loom_tensor tensor_view(const Buffer& buffer, uint64_t offset, loom_dtype dtype, int64_t ne0, int64_t ne1, int64_t ne2,
                        int64_t ne3) {
  return tensor_view_raw(buffer.get(), offset, dtype, ne0, ne1, ne2, ne3);
}

loom_tensor reshape(const loom_tensor& t, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  if (t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3] != ne0 * ne1 * ne2 * ne3) {
    throw Error("reshape: element count changes");
  }
  return tensor_view_raw(t.buffer, t.offset, t.dtype, ne0, ne1, ne2, ne3);
}

loom_tensor row_range(const loom_tensor& t, int64_t first, int64_t count) {
  return tensor_view_raw(t.buffer, t.offset + uint64_t(first) * t.nb[1], t.dtype, t.ne[0], count);
}

loom_tensor no_tensor() {
  loom_tensor t{};
  t.struct_size = sizeof(loom_tensor);
  t.dtype = LOOM_DTYPE_F32;
  for (int i = 0; i < 4; ++i) t.ne[i] = 1;
  t.ne[0] = 0;  // op validation reads ne[0] == 0 as "absent" when only shapes are asked
  return t;
}

loom_op make_op(loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs,
                const void* params) {
  loom_op op{};
  op.struct_size = sizeof(loom_op);
  op.type = type;
  op.dst = dst;
  op.n_src = static_cast<uint32_t>(srcs.size());
  uint32_t i = 0;
  for (const loom_tensor& src : srcs) op.src[i++] = src;
  op.params = params;
  return op;
}

// ---- discovery -----------------------------------------------------------------------------------

std::shared_ptr<LoadedPlugin> find_plugin(const Config& config, loom_plugin_kind kind, const std::string& name) {
  const std::vector<std::filesystem::path> configured(config.plugins.search_path.begin(),
                                                      config.plugins.search_path.end());
  const auto search_path = plugin_search_path(configured);
  PluginDiscovery found = discover_plugins(search_path);
  if (auto plugin = found.find(kind, name)) return plugin;
  std::ostringstream message;
  message << "no " << plugin_kind_name(kind) << " plugin" << (name.empty() ? "" : " named '" + name + "'")
          << " was found. Searched:";
  for (const auto& folder : search_path) message << " " << folder.string();
  message << ". Found " << plugin_kind_name(kind) << " plugins:";
  bool any = false;
  for (const auto& plugin : found.plugins) {
    if (plugin->kind() == kind) {
      message << " " << plugin->name();
      any = true;
    }
  }
  if (!any) message << " none";
  for (const auto& error : found.errors) message << "\n  load error: " << error.file.string() << ": " << error.reason;
  message << "\n(set plugins.search_path in loom.toml or LOOM_PLUGIN_PATH)";
  throw Error(message.str());
}

std::shared_ptr<LoadedPlugin> find_backend_plugin(const Config& config, const std::string& name) {
  return find_plugin(config, LOOM_PLUGIN_KIND_BACKEND, name);
}

std::string backend_config_json(const Config& config, int64_t threads_override) {
  nlohmann::json json = nlohmann::json::object();
  // Plugin options first: loom does not know their names, the plugin's create() checks them.
  for (const auto& [option, value] : config.backend.options) {
    if (is_backend_key_option(option)) {  // parse_config refuses these; a Config built in code may not
      throw Error("[backend.options] may not set '" + option + "': use backend." + option + " in [backend]");
    }
    std::visit([&json, &key = option](const auto& v) { json[key] = v; }, value);
  }
  json["device"] = config.backend.device;
  const int64_t threads = threads_override > 0 ? threads_override : config.backend.threads;
  if (threads > 0) json["threads"] = threads;
  if (config.engine.deterministic) json["batch_invariant"] = true;  // ABI 1.18; the engine checks caps
  return json.dump();
}

}  // namespace loom
