// Internal state of GgufFile, shared by the parser (gguf_file.cpp) and the value accessors
// (gguf_values.cpp). Not part of the contract.
#pragma once

#include <bit>
#include <cstring>
#include <type_traits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/mapped_file.h"

namespace loom::gguf {

// Kept outside GgufFile so the parser's free functions can reach it; Impl only wraps it.
struct GgufState {
  MappedFile mapping;               // empty for from_memory()
  std::span<const uint8_t> bytes;   // the whole file; metadata and tensor spans point into it
  std::string label;
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;         // start of the data section, from the start of the file
  std::vector<MetadataEntry> metadata;
  std::map<std::string, size_t, std::less<>> metadata_index;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;
  // with_external_data(): the header's own bytes, each tensor's bytes (in tensor order) and what keeps
  // them mapped.
  std::vector<uint8_t> owned_header;
  std::vector<std::span<const uint8_t>> external;
  std::shared_ptr<const void> external_owner;
};

struct GgufFile::Impl : GgufState {};

// Little-endian decoding of validated bytes (the spans were bounds-checked when parsed).
template <typename T>
T load_le(const uint8_t* p) {
  static_assert(std::is_trivially_copyable_v<T>);
  uint8_t buf[sizeof(T)];
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(buf, p, sizeof(T));
  } else {
    for (size_t i = 0; i < sizeof(T); ++i) buf[i] = p[sizeof(T) - 1 - i];
  }
  T value;
  std::memcpy(&value, buf, sizeof(T));
  return value;
}

// Encoded size of a fixed-size value type; 0 for string, array and unknown types.
inline uint64_t fixed_value_size(ValueType type) {
  switch (type) {
    case ValueType::uint8: case ValueType::int8: case ValueType::boolean: return 1;
    case ValueType::uint16: case ValueType::int16: return 2;
    case ValueType::uint32: case ValueType::int32: case ValueType::float32: return 4;
    case ValueType::uint64: case ValueType::int64: case ValueType::float64: return 8;
    case ValueType::string: case ValueType::array: return 0;
  }
  return 0;
}

inline bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::float64); }

}  // namespace loom::gguf
