#include "quantize/quantizer.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "plugin/host_services.h"
#include "plugin/plugin_registry.h"

namespace loom {

std::unique_ptr<Quantizer> Quantizer::create(std::shared_ptr<LoadedPlugin> plugin, const std::string& config_json) {
  if (!plugin || plugin->quantizer() == nullptr) {
    throw Error("plugin '" + (plugin ? plugin->name() : std::string("<null>")) + "' is not a quantizer plugin");
  }
  std::unique_ptr<Quantizer> q(new Quantizer());
  q->table_ = plugin->quantizer();
  q->name_ = plugin->name();
  q->plugin_ = std::move(plugin);
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  const loom_status status =
      q->table_->create(default_host_services(), config_json.c_str(), &q->instance_, error, sizeof(error));
  if (status != LOOM_STATUS_OK || q->instance_ == nullptr) {
    q->instance_ = nullptr;
    throw Error("quantizer '" + q->name_ + "': cannot create an instance: " + (error[0] ? error : status_name(status)));
  }
  const uint32_t n = q->table_->format_count(q->instance_);
  for (uint32_t i = 0; i < n; ++i) {
    loom_quant_format format{};
    format.struct_size = sizeof(format);
    const loom_status s = q->table_->format_get(q->instance_, i, &format);
    if (s != LOOM_STATUS_OK) q->fail(s, "format_get(" + std::to_string(i) + ")");
    q->formats_.push_back(format);
  }
  return q;
}

Quantizer::~Quantizer() {
  if (instance_ != nullptr) table_->destroy(instance_);
}

void Quantizer::fail(loom_status status, const std::string& what) const {
  const char* message = instance_ != nullptr ? table_->last_error(instance_) : nullptr;
  throw Error("quantizer '" + name_ + "': " + what + " failed (" + status_name(status) +
              "): " + (message != nullptr && message[0] ? message : "no message"));
}

const loom_quant_format* Quantizer::find_format(loom_dtype dtype) const {
  for (const auto& f : formats_) {
    if (f.dtype == dtype) return &f;
  }
  return nullptr;
}

int64_t Quantizer::block_elems(loom_dtype dtype) const {
  const loom_quant_format* f = find_format(dtype);
  if (f == nullptr) throw Error("quantizer '" + name_ + "' has no format " + dtype_name(dtype));
  if ((f->flags & LOOM_QUANT_FORMAT_ROW) != 0 || f->block_elems == 0) return 1;
  return f->block_elems;
}

uint64_t Quantizer::row_size(loom_dtype dtype, int64_t n_cols) const {
  uint64_t bytes = 0;
  const loom_status s = table_->row_size(instance_, dtype, n_cols, &bytes);
  if (s != LOOM_STATUS_OK) fail(s, "row_size(" + dtype_name(dtype) + ", " + std::to_string(n_cols) + ")");
  return bytes;
}

std::vector<uint8_t> Quantizer::quantize(loom_dtype dtype, std::span<const float> src, int64_t n_rows, int64_t n_cols,
                                         std::span<const float> importance, int n_threads) const {
  if (static_cast<int64_t>(src.size()) != n_rows * n_cols) throw Error("quantize: src size does not match the shape");
  if (!importance.empty() && static_cast<int64_t>(importance.size()) != n_cols) {
    throw Error("quantize: importance has " + std::to_string(importance.size()) + " values for " +
                std::to_string(n_cols) + " columns");
  }
  const uint64_t row = row_size(dtype, n_cols);
  std::vector<uint8_t> out(row * static_cast<uint64_t>(n_rows));
  parallel_rows(n_rows, n_threads, [&](int64_t first, int64_t count) {
    loom_quantize_request r{};
    r.struct_size = sizeof(r);
    r.dtype = dtype;
    r.src = src.data() + first * n_cols;
    r.n_rows = count;
    r.n_cols = n_cols;
    r.importance = importance.empty() ? nullptr : importance.data();
    r.dst = out.data() + static_cast<uint64_t>(first) * row;
    r.dst_size = static_cast<uint64_t>(count) * row;
    const loom_status s = table_->quantize(instance_, &r);
    if (s != LOOM_STATUS_OK) fail(s, "quantize to " + dtype_name(dtype));
  });
  return out;
}

std::vector<float> Quantizer::dequantize(loom_dtype dtype, std::span<const uint8_t> src, int64_t n_rows,
                                         int64_t n_cols, int n_threads) const {
  const uint64_t row = row_size(dtype, n_cols);
  if (src.size() != row * static_cast<uint64_t>(n_rows)) {
    throw Error("dequantize " + dtype_name(dtype) + ": " + std::to_string(src.size()) + " bytes for " +
                std::to_string(n_rows) + " rows of " + std::to_string(row) + " bytes");
  }
  std::vector<float> out(static_cast<size_t>(n_rows * n_cols));
  parallel_rows(n_rows, n_threads, [&](int64_t first, int64_t count) {
    const loom_status s = table_->dequantize(instance_, dtype, src.data() + static_cast<uint64_t>(first) * row,
                                             static_cast<uint64_t>(count) * row, count, n_cols,
                                             out.data() + first * n_cols);
    if (s != LOOM_STATUS_OK) fail(s, "dequantize " + dtype_name(dtype));
  });
  return out;
}

void parallel_rows(int64_t n_rows, int n_threads, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = std::clamp<int64_t>(n_threads, 1, std::max<int64_t>(n_rows, 1));
  if (n <= 1) {
    if (n_rows > 0) fn(0, n_rows);
    return;
  }
  std::exception_ptr first_error;
  std::mutex mutex;
  std::vector<std::thread> threads;
  const int64_t per = (n_rows + n - 1) / n;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t begin = t * per, end = std::min(n_rows, begin + per);
    if (begin >= end) break;
    threads.emplace_back([&, begin, end] {
      try {
        fn(begin, end - begin);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace loom
