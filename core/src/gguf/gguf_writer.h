// GgufWriter — builds a GGUF v3 file: metadata of every value type, then aligned tensor data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/dtype.h"

namespace loom::gguf {

// Keys and tensor names must be unique (loom::Error otherwise). An alignment other than 32 is
// recorded as `general.alignment` (uint32) automatically.
class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32);  // a power of two, else loom::Error

  void set_string(std::string key, std::string value);
  void set_uint32(std::string key, uint32_t value);
  void set_int32(std::string key, int32_t value);
  void set_uint64(std::string key, uint64_t value);
  void set_float32(std::string key, float value);
  void set_bool(std::string key, bool value);
  void set_string_array(std::string key, std::vector<std::string> values);
  void set_float32_array(std::string key, std::vector<float> values);
  void set_int32_array(std::string key, std::vector<int32_t> values);
  void set_bool_array(std::string key, std::vector<bool> values);
  void set_uint8_array(std::string key, std::vector<uint8_t> values);
  // Raw setter for any scalar or array type (tests of every value type). `encoded_value` is the value
  // exactly as stored in the file: a string is u64 length + bytes; an array is u32 element type,
  // u64 count, then the elements.
  void set_raw(std::string key, uint32_t value_type, std::vector<uint8_t> encoded_value);

  // dims ne0 first; data must be exactly dtype_row_bytes(type, dims[0]) * rows bytes.
  void add_tensor(std::string name, loom_dtype type, std::vector<int64_t> dims, std::vector<uint8_t> data);

  // A tensor whose data lives elsewhere (a safetensors mapping): its info only, for to_header_bytes().
  void add_tensor_info(std::string name, loom_dtype type, std::vector<int64_t> dims);

  bool has_key(std::string_view key) const;
  size_t n_tensors() const { return tensors_.size(); }

  std::vector<uint8_t> to_bytes() const;  // loom::Error when a tensor has its info only
  // The file up to its data section: metadata and tensor infos, offsets as if the data followed
  // (GgufFile::with_external_data reads it beside the tensors' own bytes).
  std::vector<uint8_t> to_header_bytes() const;
  void write(const std::filesystem::path& path) const;  // throws loom::Error on I/O failure

 private:
  struct Entry { std::string key; uint32_t type; std::vector<uint8_t> value; };
  struct Tensor { std::string name; loom_dtype type; std::vector<int64_t> dims; std::vector<uint8_t> data; uint64_t n_bytes; bool info_only; };
  uint64_t checked_bytes(const std::string& name, loom_dtype type, const std::vector<int64_t>& dims) const;
  void append_header(std::vector<uint8_t>& out) const;
  uint64_t alignment_;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace loom::gguf
