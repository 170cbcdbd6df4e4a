// Backend — a C++ owner of one backend-plugin instance (loom/backend.h): buffers, copies, op runs.
//
// Every failing call throws loom::Error carrying the plugin's last_error text, so model code reads as
// straight-line C++. The wrapper adds no threads and no hidden copies: uploads and downloads are
// enqueued on the default stream and are complete after synchronize().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/backend.h"

namespace loom {

class LoadedPlugin;
struct Config;

class Backend;

// Owned device memory. Movable; destroyed through the plugin that created it. Must not outlive its
// Backend.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  loom_buffer_t* get() const { return buffer_; }
  uint64_t size() const { return size_; }
  explicit operator bool() const { return buffer_ != nullptr; }

 private:
  friend class Backend;
  Buffer(Backend* backend, loom_buffer_t* buffer, uint64_t size) : backend_(backend), buffer_(buffer), size_(size) {}
  Backend* backend_ = nullptr;
  loom_buffer_t* buffer_ = nullptr;
  uint64_t size_ = 0;
};

class Backend {
 public:
  // Create an instance on `plugin` (a backend plugin) with `config_json` (an object, e.g.
  // {"threads": 2}). loom::Error with the plugin's message when it refuses.
  static std::unique_ptr<Backend> create(std::shared_ptr<LoadedPlugin> plugin, const std::string& config_json = "{}");
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const std::string& name() const { return name_; }  // the plugin's name, e.g. "cpu"
  uint32_t abi_minor() const;                         // the ABI minor version the plugin was built against
  const loom_backend_caps& caps() const { return caps_; }
  bool supports_weight_dtype(loom_dtype type) const;
  bool supports_kv_dtype(loom_dtype type) const;

  Buffer alloc(uint64_t size, loom_buffer_usage usage);

  // Enqueue copies on the default stream. Host memory must stay valid until synchronize().
  void upload(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size);
  void download(void* dst, const Buffer& src, uint64_t src_offset, uint64_t size);
  void copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset, uint64_t size);

  // Enqueue ops in order on the default stream (one ABI call for the whole span).
  void run(std::span<const loom_op> ops);
  void synchronize();

  // An op's support with the reason when it is not supported (empty string = supported).
  std::string unsupported_reason(const loom_op& op) const;
  // The plugin's counters (get_stats, ABI 1.5) as a JSON object; "{}" when it has none.
  std::string stats_json() const;

  const loom_backend_i& table() const { return *table_; }
  loom_backend_t* handle() const { return instance_; }

 private:
  friend class Buffer;
  Backend() = default;
  [[noreturn]] void fail(loom_status status, const std::string& what) const;
  void check(loom_status status, const char* what) const {
    if (status != LOOM_STATUS_OK) fail(status, what);
  }

  std::shared_ptr<LoadedPlugin> plugin_;  // keeps the library mapped while the instance lives
  const loom_backend_i* table_ = nullptr;
  loom_backend_t* instance_ = nullptr;
  loom_backend_caps caps_{};
  std::string name_;
};

// ---- op and tensor builders ----------------------------------------------------------------------

// A contiguous view of `buffer` at `offset` with shape ne (innermost first, unused dims 1).
loom_tensor tensor_view(const Buffer& buffer, uint64_t offset, loom_dtype dtype, int64_t ne0, int64_t ne1 = 1,
                        int64_t ne2 = 1, int64_t ne3 = 1);
// A contiguous view of `buffer`; used for a weight, keeps the GGUF row layout.
loom_tensor tensor_view_raw(loom_buffer_t* buffer, uint64_t offset, loom_dtype dtype, int64_t ne0, int64_t ne1 = 1,
                            int64_t ne2 = 1, int64_t ne3 = 1);
// The same bytes seen with another shape (element count must match; contiguous only).
loom_tensor reshape(const loom_tensor& t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
// Rows [first, first + count) of a 2-D tensor, as a view of the same bytes (a fused weight's parts).
loom_tensor row_range(const loom_tensor& t, int64_t first, int64_t count);
// An absent optional operand.
loom_tensor no_tensor();

loom_op make_op(loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs,
                const void* params = nullptr);

// The plugin's name for a status code, e.g. "INVALID_ARGUMENT".
const char* status_name(loom_status status);

// The backend plugin called `name` on the configured search path ("" = the first backend found).
// loom::Error listing the backends found and any load errors when it is missing.
std::shared_ptr<LoadedPlugin> find_backend_plugin(const Config& config, const std::string& name);
// Any plugin of `kind` and `name` on the configured search path, with the same error reporting.
std::shared_ptr<LoadedPlugin> find_plugin(const Config& config, loom_plugin_kind kind, const std::string& name);

// The config_json for creating the configured backend: [backend] device and threads (threads_override > 0
// replaces threads) plus every [backend.options] entry with its TOML type kept. loom::Error when an option
// names device or threads, which only [backend] sets.
std::string backend_config_json(const Config& config, int64_t threads_override = 0);

}  // namespace loom
