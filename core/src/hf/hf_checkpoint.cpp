#include "hf/hf_checkpoint.h"

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "hf/safetensors_file.h"

namespace loom::hf {

namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot be opened");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw Error(path.string() + ": not JSON: " + e.what());
  }
}

// The shards: model.safetensors, or every file model.safetensors.index.json's weight_map names.
std::vector<SafetensorsFile> open_shards(const std::filesystem::path& dir) {
  std::vector<SafetensorsFile> shards;
  if (std::filesystem::exists(dir / "model.safetensors")) {
    shards.push_back(SafetensorsFile::open(dir / "model.safetensors"));
    return shards;
  }
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (!std::filesystem::exists(index)) throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json (Loom reads safetensors weights)");
  const json map = read_json(index).value("weight_map", json::object());
  std::set<std::string> files;
  for (const auto& [name, file] : map.items()) {
    if (!file.is_string()) throw Error(index.string() + ": weight_map['" + name + "'] is not a file name");
    files.insert(file.get<std::string>());
  }
  if (files.empty()) throw Error(index.string() + ": weight_map names no files");
  for (const std::string& file : files) {
    if (file.find('/') != std::string::npos || file.find("..") != std::string::npos) throw Error(index.string() + ": shard '" + file + "' is not a file of the folder");
    shards.push_back(SafetensorsFile::open(dir / file));
  }
  return shards;
}

uint64_t config_uint(const json& config, const std::filesystem::path& dir, const char* key) {
  if (!config.contains(key) || !config[key].is_number_unsigned())
    throw Error((dir / "config.json").string() + ": '" + key + "' is missing or not a non-negative integer");
  return config[key].get<uint64_t>();
}

// sentence-transformers' pooling (modules.json -> its Pooling module's config.json), as llama.cpp's
// converter reads it: 1 mean, 2 cls, 3 last; 2 (the [CLS] row) without one.
uint32_t sentence_transformers_pooling(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "modules.json")) return 2;
  const json modules = read_json(dir / "modules.json");
  for (const json& module : modules) {
    if (!module.is_object() || !module.value("type", std::string()).ends_with("Pooling")) continue;
    const json pooling = read_json(dir / module.value("path", std::string()) / "config.json");
    if (pooling.value("pooling_mode_mean_tokens", false)) return 1;
    if (pooling.value("pooling_mode_cls_token", false)) return 2;
    if (pooling.value("pooling_mode_lasttoken", false)) return 3;
    const std::string mode = pooling.value("pooling_mode", std::string());
    if (mode == "mean") return 1;
    if (mode == "cls") return 2;
    if (mode == "lasttoken") return 3;
    throw Error((dir / module.value("path", std::string()) / "config.json").string() + ": a pooling mode Loom does not run (mean, cls, lasttoken)");
  }
  return 2;
}

// tokenizer.json's WordPiece vocabulary in llama.cpp's "bert" layout: word-initial pieces start with
// U+2581, continuations lose "##", special tokens (its added_tokens) stay as written and are control.
void add_wordpiece_tokenizer(const std::filesystem::path& dir, gguf::GgufWriter& writer, int64_t n_vocab) {
  const std::filesystem::path path = dir / "tokenizer.json";
  const json tok = read_json(path);
  const json model = tok.value("model", json::object());
  const json vocab = model.value("vocab", json::object()), added_tokens = tok.value("added_tokens", json::array());
  if (model.value("type", std::string()) != "WordPiece")
    throw Error(path.string() + ": model type '" + model.value("type", std::string()) + "' (Loom reads a bert checkpoint's WordPiece tokenizer)");
  std::vector<std::string> tokens(static_cast<size_t>(n_vocab));
  std::vector<int32_t> types(size_t(n_vocab), 1);
  std::vector<bool> seen(size_t(n_vocab), false);
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab)
      throw Error(path.string() + ": vocab entry '" + piece + "' has an id outside 0.." + std::to_string(n_vocab - 1));
    const auto i = size_t(id.get<int64_t>());
    tokens[i] = piece.rfind("##", 0) == 0 ? piece.substr(2) : "\xe2\x96\x81" + piece;
    seen[i] = true;
  }
  std::map<std::string, int32_t> special;
  for (const json& added : added_tokens) {
    const int64_t id = added.value("id", int64_t(-1));
    if (id < 0 || id >= n_vocab) continue;
    tokens[size_t(id)] = added.value("content", std::string());
    seen[size_t(id)] = true;
    if (added.value("special", false)) types[size_t(id)] = 3;
    special[added.value("content", std::string())] = int32_t(id);
  }
  for (size_t i = 0; i < seen.size(); i++)
    if (!seen[i]) throw Error(path.string() + ": no token has id " + std::to_string(i) + " of the model's " + std::to_string(n_vocab));
  const json config = std::filesystem::exists(dir / "tokenizer_config.json") ? read_json(dir / "tokenizer_config.json") : json::object();
  auto special_id = [&](const char* key, const char* fallback) {
    std::string name = fallback;
    if (config.contains(key) && config[key].is_string()) name = config[key].get<std::string>();
    const auto it = special.find(name);
    if (it == special.end()) throw Error(path.string() + ": the special token '" + name + "' (" + key + ") is not among its added tokens");
    return uint32_t(it->second);
  };
  writer.set_string("tokenizer.ggml.model", "bert");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_int32_array("tokenizer.ggml.token_type", types);
  writer.set_uint32("tokenizer.ggml.token_type_count", 2);
  writer.set_uint32("tokenizer.ggml.bos_token_id", special_id("cls_token", "[CLS]"));
  writer.set_uint32("tokenizer.ggml.cls_token_id", special_id("cls_token", "[CLS]"));
  writer.set_uint32("tokenizer.ggml.seperator_token_id", special_id("sep_token", "[SEP]"));
  writer.set_uint32("tokenizer.ggml.padding_token_id", special_id("pad_token", "[PAD]"));
  writer.set_uint32("tokenizer.ggml.unknown_token_id", special_id("unk_token", "[UNK]"));
  writer.set_uint32("tokenizer.ggml.mask_token_id", special_id("mask_token", "[MASK]"));
}

// bert's tensors: the checkpoint's name (after an optional "bert." prefix) -> llama.cpp's, per layer
// with {} for its index.
const std::vector<std::pair<std::string, std::string>> kBertTensors = {
    {"embeddings.word_embeddings.weight", "token_embd.weight"},
    {"embeddings.position_embeddings.weight", "position_embd.weight"},
    {"embeddings.token_type_embeddings.weight", "token_types.weight"},
    {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
    {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
    {"encoder.layer.{}.attention.self.query.weight", "blk.{}.attn_q.weight"},
    {"encoder.layer.{}.attention.self.query.bias", "blk.{}.attn_q.bias"},
    {"encoder.layer.{}.attention.self.key.weight", "blk.{}.attn_k.weight"},
    {"encoder.layer.{}.attention.self.key.bias", "blk.{}.attn_k.bias"},
    {"encoder.layer.{}.attention.self.value.weight", "blk.{}.attn_v.weight"},
    {"encoder.layer.{}.attention.self.value.bias", "blk.{}.attn_v.bias"},
    {"encoder.layer.{}.attention.output.dense.weight", "blk.{}.attn_output.weight"},
    {"encoder.layer.{}.attention.output.dense.bias", "blk.{}.attn_output.bias"},
    {"encoder.layer.{}.attention.output.LayerNorm.weight", "blk.{}.attn_output_norm.weight"},
    {"encoder.layer.{}.attention.output.LayerNorm.bias", "blk.{}.attn_output_norm.bias"},
    {"encoder.layer.{}.intermediate.dense.weight", "blk.{}.ffn_up.weight"},
    {"encoder.layer.{}.intermediate.dense.bias", "blk.{}.ffn_up.bias"},
    {"encoder.layer.{}.output.dense.weight", "blk.{}.ffn_down.weight"},
    {"encoder.layer.{}.output.dense.bias", "blk.{}.ffn_down.bias"},
    {"encoder.layer.{}.output.LayerNorm.weight", "blk.{}.layer_output_norm.weight"},
    {"encoder.layer.{}.output.LayerNorm.bias", "blk.{}.layer_output_norm.bias"},
};

std::string with_index(std::string pattern, int64_t il) {
  const size_t at = pattern.find("{}");
  return at == std::string::npos ? pattern : pattern.replace(at, 2, std::to_string(il));
}

struct Shards {
  std::vector<SafetensorsFile> files;
  const SafeTensor* find(const std::string& name) const {
    for (const SafetensorsFile& f : files)
      if (const SafeTensor* t = f.find(name)) return t;
    return nullptr;
  }
};

gguf::GgufFile open_bert(const std::filesystem::path& dir, const json& config) {
  auto shards = std::make_shared<Shards>();
  shards->files = open_shards(dir);
  gguf::GgufWriter writer;
  const std::string a = "bert.";
  const auto n_layers = int64_t(config_uint(config, dir, "num_hidden_layers"));
  writer.set_string("general.architecture", "bert");
  writer.set_string("general.name", dir.filename().string());
  writer.set_uint32(a + "context_length", uint32_t(config_uint(config, dir, "max_position_embeddings")));
  writer.set_uint32(a + "embedding_length", uint32_t(config_uint(config, dir, "hidden_size")));
  writer.set_uint32(a + "block_count", uint32_t(n_layers));
  writer.set_uint32(a + "feed_forward_length", uint32_t(config_uint(config, dir, "intermediate_size")));
  writer.set_uint32(a + "attention.head_count", uint32_t(config_uint(config, dir, "num_attention_heads")));
  writer.set_float32(a + "attention.layer_norm_epsilon", config.value("layer_norm_eps", 1e-12f));
  writer.set_bool(a + "attention.causal", false);
  writer.set_uint32(a + "pooling_type", sentence_transformers_pooling(dir));
  if (config.value("hidden_act", std::string("gelu")) != "gelu")
    throw Error((dir / "config.json").string() + ": hidden_act '" + config.value("hidden_act", std::string()) + "' (Loom runs bert with gelu)");
  if (config.value("position_embedding_type", std::string("absolute")) != "absolute")
    throw Error((dir / "config.json").string() + ": position_embedding_type '" + config.value("position_embedding_type", std::string()) +
                "' (Loom runs bert with absolute positions)");
  add_wordpiece_tokenizer(dir, writer, int64_t(config_uint(config, dir, "vocab_size")));

  std::vector<std::span<const uint8_t>> data;
  auto add = [&](const std::string& hf_name, const std::string& gguf_name) {
    const SafeTensor* t = shards->find(hf_name);
    if (t == nullptr) t = shards->find("bert." + hf_name);
    if (t == nullptr) throw Error(dir.string() + ": tensor '" + hf_name + "' is missing from the safetensors");
    const int dtype = safetensors_dtype(t->dtype);
    if (dtype < 0) throw Error(dir.string() + ": tensor '" + t->name + "' has dtype " + t->dtype + " (Loom reads F32, F16 and BF16 weights)");
    std::vector<int64_t> dims(t->shape.rbegin(), t->shape.rend());  // PyTorch's [out, in] is GGUF's [in, out]
    writer.add_tensor_info(gguf_name, loom_dtype(dtype), dims);
    data.push_back(t->data);
  };
  for (const auto& [hf_name, gguf_name] : kBertTensors) {
    if (hf_name.find("{}") == std::string::npos) {
      add(hf_name, gguf_name);
      continue;
    }
    for (int64_t il = 0; il < n_layers; il++) add(with_index(hf_name, il), with_index(gguf_name, il));
  }
  return gguf::GgufFile::with_external_data(writer.to_header_bytes(), std::move(data), shards, dir.string());
}

}  // namespace

bool is_checkpoint_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(path / "config.json", ec);
}

gguf::GgufFile open_checkpoint(const std::filesystem::path& dir) {
  if (!is_checkpoint_dir(dir)) throw Error(dir.string() + ": not a Hugging Face model folder (no config.json)");
  const json config = read_json(dir / "config.json");
  const std::string type = config.value("model_type", std::string());
  if (type == "bert") return open_bert(dir, config);
  throw Error((dir / "config.json").string() + ": model_type '" + type + "' is not one Loom reads from a Hugging Face folder yet (bert); convert it with llama.cpp's convert_hf_to_gguf.py");
}

gguf::GgufFile open_model_file(const std::filesystem::path& path) {
  return is_checkpoint_dir(path) ? open_checkpoint(path) : gguf::GgufFile::open(path);
}

}  // namespace loom::hf
