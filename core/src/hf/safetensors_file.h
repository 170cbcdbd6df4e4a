// SafetensorsFile — a memory-mapped, validated .safetensors file (Hugging Face's weight format): an
// 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the data. Everything is checked before use (header length and JSON, dtypes, that each range
// lies in the file, matches its shape and overlaps no other); a malformed file throws loom::Error
// naming the file and what is wrong. Tensors stay in the mapping: nothing is copied.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/mapped_file.h"
#include "loom/dtype.h"

namespace loom::hf {

struct SafeTensor {
  std::string name;
  std::string dtype;           // as the file spells it: F32, F16, BF16, I8, U8, I32, I64, F8_E4M3, ...
  std::vector<int64_t> shape;  // outermost first, as PyTorch's
  std::span<const uint8_t> data;
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  // Parse bytes the caller keeps alive (tests). `label` names them in errors.
  static SafetensorsFile from_memory(std::span<const uint8_t> bytes, std::string label = "<memory>");

  const std::string& label() const { return label_; }
  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  const SafeTensor* find(std::string_view name) const;

 private:
  void parse(std::span<const uint8_t> bytes);
  std::string label_;
  gguf::MappedFile mapping_;
  std::vector<SafeTensor> tensors_;
};

// The Loom dtype of a safetensors dtype Loom reads as weights (F32, F16, BF16), or -1.
int safetensors_dtype(std::string_view dtype);

}  // namespace loom::hf
