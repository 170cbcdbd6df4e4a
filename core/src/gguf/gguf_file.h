// GgufFile — a memory-mapped, fully validated GGUF file (v2 and v3).
//
// Everything read is checked before use: magic, version, counts, string lengths, value types,
// tensor shapes, types, offsets, alignment and overlap. A malformed file throws loom::Error naming
// the file and what is wrong; nothing is read out of bounds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/dtype.h"

namespace loom::gguf {

enum class ValueType : uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6, boolean = 7,
  string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

std::string_view value_type_name(ValueType type);

// One metadata value. Arrays keep their elements in the mapped file; accessors decode on demand.
struct MetadataValue {
  ValueType type = ValueType::uint8;
  ValueType array_type = ValueType::uint8;  // element type when type == array
  uint64_t array_size = 0;
  std::span<const uint8_t> raw;             // the encoded value (for arrays: the elements)
};

struct MetadataEntry {
  std::string key;
  MetadataValue value;
};

struct TensorInfo {
  std::string name;
  loom_dtype type = LOOM_DTYPE_F32;
  std::vector<int64_t> dims;  // ne0 (innermost) first
  int64_t n_elements = 0;
  uint64_t offset = 0;        // relative to the start of the data section
  uint64_t n_bytes = 0;
};

class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);
  // Parse a buffer the caller keeps alive (fuzzing, tests). `label` names it in errors.
  static GgufFile from_memory(std::span<const uint8_t> bytes, std::string label = "<memory>");
  // A model whose tensors live elsewhere (a Hugging Face checkpoint's safetensors mappings): `header`
  // is a GGUF up to its data section (GgufWriter::to_header_bytes), `tensor_data` each tensor's bytes
  // in its order, `owner` what keeps them alive. Nothing is copied; tensor_data() returns those spans.
  static GgufFile with_external_data(std::vector<uint8_t> header, std::vector<std::span<const uint8_t>> tensor_data,
                                     std::shared_ptr<const void> owner, std::string label);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& label() const;
  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t file_size() const;
  uint64_t data_offset() const;  // start of the tensor data section, from the start of the file

  const std::vector<MetadataEntry>& metadata() const;
  const MetadataValue* find(std::string_view key) const;

  // Typed getters: nullopt when absent; loom::Error when present with an incompatible type.
  // Integer getters accept any integer type whose value fits.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // any numeric type
  std::optional<bool> get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;  // empty when absent
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<bool> get_bool_array(std::string_view key) const;  // empty when absent

  // Render a scalar (or a short preview of an array) for `loom gguf info`.
  std::string value_to_string(const MetadataValue& value, size_t max_array_items = 8) const;

  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find_tensor(std::string_view name) const;
  std::span<const uint8_t> tensor_data(const TensorInfo& tensor) const;
  // Once the weights are copied to a backend: give the tensor data's resident pages back to the
  // system (a file opened with open(); nothing for from_memory). They stay readable (read again from
  // the file if touched), so this only lowers resident memory.
  void release_tensor_pages() const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::gguf
