#include "lora/lora_adapter.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/gguf_file.h"

namespace loom {

namespace {

constexpr const char* kTargetNames[kLoraTargets] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

// "blk.<layer>.<target>.weight.lora_<a|b>" -> layer, target, a/b; false for any other name.
bool parse_name(std::string_view name, int32_t& layer, int& target, bool& is_a) {
  if (!name.starts_with("blk.")) return false;
  name.remove_prefix(4);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  layer = 0;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9' || layer > 100000) return false;
    layer = layer * 10 + (c - '0');
  }
  name.remove_prefix(dot + 1);
  for (int t = 0; t < kLoraTargets; t++) {
    const std::string stem = std::string(kTargetNames[t]) + ".weight.lora_";
    if (name.size() == stem.size() + 1 && name.starts_with(stem) && (name.back() == 'a' || name.back() == 'b')) {
      target = t;
      is_a = name.back() == 'a';
      return true;
    }
  }
  return false;
}

}  // namespace

const char* lora_target_name(LoraTarget target) { return kTargetNames[int(target)]; }

LoraAdapter read_lora_adapter(const std::filesystem::path& path, std::string name, int32_t n_layers) {
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const std::string where = file.label() + ": ";
  if (file.get_string("general.type").value_or("") != "adapter")
    throw Error(where + "general.type is '" + file.get_string("general.type").value_or("(none)") + "', not 'adapter' (a LoRA adapter GGUF, as llama.cpp's convert_lora_to_gguf.py writes)");
  if (file.get_string("adapter.type").value_or("") != "lora")
    throw Error(where + "adapter.type is '" + file.get_string("adapter.type").value_or("(none)") + "'; Loom applies 'lora' adapters");
  LoraAdapter adapter;
  adapter.name = std::move(name);
  adapter.path = path;
  adapter.architecture = file.get_string("general.architecture").value_or("");
  adapter.alpha = float(file.get_float("adapter.lora.alpha").value_or(0.0));
  if (!(adapter.alpha >= 0.0f)) throw Error(where + "adapter.lora.alpha must be >= 0");

  std::map<std::pair<int32_t, int>, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> pairs;
  for (const gguf::TensorInfo& t : file.tensors()) {
    int32_t layer;
    int target;
    bool is_a;
    if (!parse_name(t.name, layer, target, is_a))
      throw Error(where + "tensor '" + t.name + "' is not one Loom applies (the lora_a / lora_b of blk.N.{attn_q, attn_k, attn_v, "
                  "attn_output, ffn_gate, ffn_up, ffn_down}.weight; not the output head, embeddings, experts or fused matrices)");
    if (layer >= n_layers) throw Error(where + "tensor '" + t.name + "' adapts layer " + std::to_string(layer) + " of a model of " + std::to_string(n_layers) + " layers");
    auto& pair = pairs[{layer, target}];
    (is_a ? pair.first : pair.second) = &t;
  }
  if (pairs.empty()) throw Error(where + "holds no lora_a / lora_b tensors");
  for (const auto& [key, pair] : pairs) {
    const std::string base = "blk." + std::to_string(key.first) + "." + kTargetNames[key.second] + ".weight";
    if (pair.first == nullptr || pair.second == nullptr)
      throw Error(where + "'" + base + (pair.first == nullptr ? ".lora_b" : ".lora_a") + "' has no matching " + (pair.first == nullptr ? "lora_a" : "lora_b"));
    const gguf::TensorInfo &a = *pair.first, &b = *pair.second;
    if (a.dims.size() != 2 || b.dims.size() != 2 || a.dims[1] != b.dims[0] || a.dims[1] <= 0)
      throw Error(where + "'" + base + "': lora_a must be [n_in, rank] and lora_b [rank, n_out] with the same rank");
    LoraMatrix m;
    m.layer = key.first;
    m.target = LoraTarget(key.second);
    m.n_in = a.dims[0], m.rank = a.dims[1], m.n_out = b.dims[1];
    for (const gguf::TensorInfo* t : {&a, &b}) {
      const loom_dtype type = t->type;
      if (type != LOOM_DTYPE_F32 && type != LOOM_DTYPE_F16 && type != LOOM_DTYPE_BF16 && type != LOOM_DTYPE_Q8_0)
        throw Error(where + "tensor '" + t->name + "' is of a type Loom does not read in adapters (F32, F16, BF16, Q8_0)");
    }
    m.a = dequantize_rows(a.type, file.tensor_data(a), a.n_elements);
    m.b = dequantize_rows(b.type, file.tensor_data(b), b.n_elements);
    // llama.cpp: scale * alpha / rank of this matrix (its lora_a's ne[1]), or scale when alpha is 0.
    const float factor = adapter.alpha != 0.0f ? adapter.alpha / float(m.rank) : 1.0f;
    if (factor != 1.0f)
      for (float& v : m.b) v *= factor;
    adapter.max_rank = std::max(adapter.max_rank, m.rank);
    adapter.matrices.push_back(std::move(m));
  }
  return adapter;
}

}  // namespace loom
