// The tensors of a Hugging Face folder as llama.cpp's converter names and lays them out, by the
// family's table (hf_family.h): found under the family's prefix and a wrapper's renames, left in the
// safetensors mappings where their bytes are already the converter's, rearranged and kept beside them
// otherwise (rope pairs, 1 + w norms, value heads, RoBERTa's positions, quantized layers repacked,
// experts stacked or split).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "hf/hf_family.h"
#include "hf/linear_attention.h"
#include "hf/quantized_linear.h"
#include "hf/safetensors_file.h"

namespace loom::hf {

// The folder's safetensors files, and the tensors rearranged from them (a deque: spans into it stay
// valid as it grows).
struct Shards {
  std::vector<SafetensorsFile> files;
  std::deque<std::vector<uint8_t>> rearranged;
  const SafeTensor* find(const std::string& name) const {
    for (const SafetensorsFile& f : files)
      if (const SafeTensor* t = f.find(name)) return t;
    return nullptr;
  }
};

class FolderTensors {
 public:
  // scheme: config.json's quantization_config (quantized_linear.h), if any.
  FolderTensors(const Family& family, const Wrapper* wrapper, const std::filesystem::path& dir, const nlohmann::json& config,
                std::optional<QuantScheme> scheme, gguf::GgufWriter& writer, Shards& shards);

  // Every tensor of the family's table, in its order: the tensor infos go to the writer, and the
  // bytes of each are returned in the same order. loom::Error naming the tensor and the folder.
  std::vector<std::span<const uint8_t>> add_all();

 private:
  using Rows = TensorName::Rows;

  const SafeTensor* find(const std::string& hf_name) const;
  loom_dtype check_dtype(const SafeTensor& t) const;
  void add_owned(const std::string& gguf_name, loom_dtype dtype, std::vector<int64_t> dims, std::vector<uint8_t> bytes);
  int64_t heads_of(const TensorName& spec) const;
  std::vector<uint8_t> value_head_bytes(std::span<const uint8_t> bytes, int64_t rows, int64_t row_elems, size_t elem_bytes, Rows kind) const;
  void add_value_heads(const SafeTensor& t, const std::string& gguf_name, const TensorName& spec);
  bool add_quantized(const std::string& hf_name, const std::string& gguf_name, const TensorName& spec);
  void add_split_experts(const std::string& hf_name, const std::string& gguf_name, const TensorName& spec);
  void add(const std::string& hf_name, const std::string& gguf_name, const TensorName& spec);
  bool add_fused_experts(const std::string& hf_pattern, const std::string& gguf_name);
  bool add_quantized_experts(const std::string& hf_pattern, const std::string& gguf_name);
  void add_experts(const std::string& hf_pattern, const std::string& gguf_name);
  std::function<const SafeTensor*(const std::string&)> finder() const {
    return [this](const std::string& name) { return find(name); };
  }

  const Family& family_;
  const Wrapper* wrapper_;
  const std::filesystem::path dir_;
  const nlohmann::json& config_;
  const std::optional<QuantScheme> scheme_;
  gguf::GgufWriter& writer_;
  Shards& shards_;
  std::vector<std::span<const uint8_t>> data_;
  int64_t n_heads_ = 0, n_kv_heads_ = 0, n_experts_ = 0;
  // Qwen 3.5's linear attention (linear_attention.h): value heads tiled only where the family tiles them.
  ValueHeads value_heads_, tiled_;
};

}  // namespace loom::hf
