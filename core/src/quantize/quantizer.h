// Quantizer — a C++ owner of one quantizer-plugin instance (loom/quant.h): its formats, and
// quantize / dequantize of whole tensors. Failing calls throw loom::Error with the plugin's message.
//
// Thread-safe like the table it wraps: quantize and dequantize may run on many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/quant.h"

namespace loom {

class LoadedPlugin;

class Quantizer {
 public:
  // loom::Error when `plugin` is not a quantizer or refuses to start.
  static std::unique_ptr<Quantizer> create(std::shared_ptr<LoadedPlugin> plugin, const std::string& config_json = "{}");
  ~Quantizer();
  Quantizer(const Quantizer&) = delete;
  Quantizer& operator=(const Quantizer&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<loom_quant_format>& formats() const { return formats_; }
  // The format for `dtype`, or nullptr when this plugin does not own it.
  const loom_quant_format* find_format(loom_dtype dtype) const;
  bool has_format(loom_dtype dtype) const { return find_format(dtype) != nullptr; }
  // Elements per block of a blocked format; for a per-row format, 1 (any row length works).
  int64_t block_elems(loom_dtype dtype) const;

  uint64_t row_size(loom_dtype dtype, int64_t n_cols) const;
  // src [n_cols, n_rows] -> the encoded rows. importance [n_cols] or empty. Rows are split over
  // n_threads threads (the slots are thread-safe).
  std::vector<uint8_t> quantize(loom_dtype dtype, std::span<const float> src, int64_t n_rows, int64_t n_cols,
                                std::span<const float> importance = {}, int n_threads = 1) const;
  std::vector<float> dequantize(loom_dtype dtype, std::span<const uint8_t> src, int64_t n_rows, int64_t n_cols,
                                int n_threads = 1) const;

 private:
  Quantizer() = default;
  [[noreturn]] void fail(loom_status status, const std::string& what) const;

  std::shared_ptr<LoadedPlugin> plugin_;  // keeps the library mapped while the instance lives
  const loom_quantizer_i* table_ = nullptr;
  loom_quantizer_t* instance_ = nullptr;
  std::string name_;
  std::vector<loom_quant_format> formats_;
};

// Run fn(first_row, n_rows) over [0, n_rows) split into about n_threads contiguous ranges; the first
// exception thrown by any range is rethrown after all have finished.
void parallel_rows(int64_t n_rows, int n_threads, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace loom
