#include "lora/peft_adapter.h"

#include <cmath>
#include <cstring>
#include <map>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "hf/json_file.h"
#include "hf/safetensors_file.h"
#include "model/model_info.h"

namespace loom {

namespace {

using nlohmann::json;

// PEFT's module names (transformers' attribute paths) of the projections Loom adapts.
constexpr std::pair<const char*, LoraTarget> kModules[] = {
    {"self_attn.q_proj", LoraTarget::attn_q},   {"self_attn.k_proj", LoraTarget::attn_k}, {"self_attn.v_proj", LoraTarget::attn_v},
    {"self_attn.o_proj", LoraTarget::attn_output}, {"mlp.gate_proj", LoraTarget::ffn_gate}, {"mlp.up_proj", LoraTarget::ffn_up},
    {"mlp.down_proj", LoraTarget::ffn_down}};

// The tensor's values as float32 (F32, F16 or BF16), row-major as stored.
std::vector<float> values_of(const hf::SafeTensor& t, const std::string& file) {
  const int type = hf::safetensors_dtype(t.dtype);
  if (type != LOOM_DTYPE_F32 && type != LOOM_DTYPE_F16 && type != LOOM_DTYPE_BF16)
    throw Error(file + ": tensor '" + t.name + "' is " + t.dtype + " (Loom reads F32, F16 and BF16 adapters)");
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return dequantize_rows(loom_dtype(type), t.data, n);
}

// llama.cpp's LlamaModel.permute on rows: each head's two halves of rows become interleaved pairs.
std::vector<float> interleave_rope_rows(const std::vector<float>& rows, int64_t n_rows, int64_t n_cols, int64_t n_heads) {
  const int64_t head = n_rows / n_heads, half = head / 2;
  std::vector<float> out(rows.size());
  for (int64_t h = 0; h < n_heads; h++)
    for (int64_t i = 0; i < half; i++)
      for (int64_t part = 0; part < 2; part++)
        std::memcpy(&out[size_t((h * head + 2 * i + part) * n_cols)], &rows[size_t((h * head + part * half + i) * n_cols)], size_t(n_cols) * 4);
  return out;
}

bool interleaves_rope_halves(const std::string& arch) { return arch == "llama" || arch == "mistral3" || arch == "granite" || arch == "smollm3"; }

}  // namespace

bool is_peft_adapter_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(path / "adapter_config.json", ec);
}

LoraAdapter read_peft_adapter(const std::filesystem::path& dir, std::string name, const ModelInfo& info) {
  const std::string config_path = (dir / "adapter_config.json").string();
  const json config = hf::read_json_file(dir / "adapter_config.json");
  const auto refuse = [&](const std::string& what) { throw Error(config_path + ": " + what); };
  if (config.value("peft_type", std::string("LORA")) != "LORA") refuse("peft_type '" + config.value("peft_type", std::string()) + "' (Loom applies LORA adapters)");
  if (config.value("use_dora", false)) refuse("use_dora: DoRA adapters are not applied by Loom yet");
  if (config.value("fan_in_fan_out", false)) refuse("fan_in_fan_out: transposed (Conv1D) adapters are not read");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (config.contains(key) && config[key].is_object() && !config[key].empty()) refuse(std::string(key) + " gives modules ranks or alphas of their own, which Loom does not read yet");
  if (config.contains("modules_to_save") && config["modules_to_save"].is_array() && !config["modules_to_save"].empty())
    refuse("modules_to_save replaces whole modules (" + config["modules_to_save"].dump() + "), which a run-time adapter cannot");
  if (!config.contains("r") || !config["r"].is_number_integer() || config["r"].get<int64_t>() < 1) refuse("'r' is missing or not a positive integer");
  const int64_t r = config["r"].get<int64_t>();
  const double alpha = config.contains("lora_alpha") && config["lora_alpha"].is_number() ? config["lora_alpha"].get<double>() : double(r);
  const float scale = float(config.value("use_rslora", false) ? alpha / std::sqrt(double(r)) : alpha / double(r));

  const std::filesystem::path weights = dir / "adapter_model.safetensors";
  if (!std::filesystem::exists(weights)) {
    if (std::filesystem::exists(dir / "adapter_model.bin"))
      throw Error((dir / "adapter_model.bin").string() + ": a pickled adapter, which Loom does not load; save it with safetensors (PEFT's default)");
    throw Error(dir.string() + ": no adapter_model.safetensors");
  }
  const hf::SafetensorsFile file = hf::SafetensorsFile::open(weights);
  const std::string where = weights.string();
  LoraAdapter adapter;
  adapter.name = std::move(name);
  adapter.path = dir;
  adapter.architecture = info.arch_name;  // PEFT names no architecture: the base model's shapes are checked in the slot
  std::map<std::pair<int32_t, int>, std::pair<const hf::SafeTensor*, const hf::SafeTensor*>> pairs;
  for (const hf::SafeTensor& t : file.tensors()) {
    // base_model.model.model.layers.N.<module>.lora_A.weight (model.language_model.layers in multimodal models).
    const size_t at = t.name.find("layers.");
    bool known = false;
    if (at != std::string::npos) {
      size_t end = at + 7;
      int32_t layer = 0;
      while (end < t.name.size() && std::isdigit(uint8_t(t.name[end])) && layer < 100000) layer = layer * 10 + (t.name[end++] - '0');
      const std::string rest = end < t.name.size() && t.name[end] == '.' ? t.name.substr(end + 1) : "";
      for (const auto& [module, target] : kModules) {
        for (const char* side : {".lora_A.weight", ".lora_B.weight"}) {
          if (rest != std::string(module) + side) continue;
          if (layer >= info.n_layers) throw Error(where + ": tensor '" + t.name + "' adapts layer " + std::to_string(layer) + " of a model of " + std::to_string(info.n_layers) + " layers");
          auto& pair = pairs[{layer, int(target)}];
          (side[6] == 'A' ? pair.first : pair.second) = &t;
          known = true;
        }
      }
    }
    if (!known)
      throw Error(where + ": tensor '" + t.name + "' is not one Loom applies (lora_A / lora_B of the q, k, v, o, gate, up and down projections)");
  }
  if (pairs.empty()) throw Error(where + ": holds no lora_A / lora_B tensors");
  for (const auto& [key, pair] : pairs) {
    const std::string module = "layer " + std::to_string(key.first) + " " + lora_target_name(LoraTarget(key.second));
    if (pair.first == nullptr || pair.second == nullptr) throw Error(where + ": " + module + " has lora_" + (pair.first ? "A without lora_B" : "B without lora_A"));
    const hf::SafeTensor &a = *pair.first, &b = *pair.second;
    if (a.shape.size() != 2 || b.shape.size() != 2 || a.shape[0] != b.shape[1] || a.shape[0] < 1)
      throw Error(where + ": " + module + ": lora_A must be [r, n_in] and lora_B [n_out, r] with the same r");
    LoraMatrix m;
    m.layer = key.first;
    m.target = LoraTarget(key.second);
    m.rank = a.shape[0], m.n_in = a.shape[1], m.n_out = b.shape[0];
    m.a = values_of(a, where);
    m.b = values_of(b, where);
    for (float& v : m.b) v *= scale;
    const bool q = m.target == LoraTarget::attn_q, k = m.target == LoraTarget::attn_k;
    if ((q || k) && interleaves_rope_halves(info.arch_name)) {
      const int64_t heads = q ? info.n_heads : info.layer(m.layer).n_kv_heads;
      if (heads < 1 || m.n_out % (2 * heads) != 0) throw Error(where + ": " + module + ": " + std::to_string(m.n_out) + " rows are not whole heads");
      m.b = interleave_rope_rows(m.b, m.n_out, m.rank, heads);
    }
    adapter.max_rank = std::max(adapter.max_rank, m.rank);
    adapter.matrices.push_back(std::move(m));
  }
  return adapter;
}

}  // namespace loom
