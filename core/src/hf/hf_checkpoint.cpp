#include "hf/hf_checkpoint.h"

#include <cstring>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_writer.h"
#include "hf/hf_family.h"
#include "hf/folder_tensors.h"
#include "hf/json_file.h"
#include "hf/quantized_linear.h"
#include "hf/safetensors_file.h"
#include "hf/tokenizer_json.h"

namespace loom::hf {

namespace {

using nlohmann::json;
using Rows = TensorName::Rows;

// The shards: model.safetensors, or every file model.safetensors.index.json's weight_map names.
std::vector<SafetensorsFile> open_shards(const std::filesystem::path& dir) {
  std::vector<SafetensorsFile> shards;
  if (std::filesystem::exists(dir / "model.safetensors")) {
    shards.push_back(SafetensorsFile::open(dir / "model.safetensors"));
    return shards;
  }
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (!std::filesystem::exists(index)) throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json (Loom reads safetensors weights)");
  const json map = read_json_file(index).value("weight_map", json::object());
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

// generation_config.json's recommended sampling as general.sampling.*, as llama.cpp's converter writes
// it (gguf-py's Metadata): temperature, top_k, top_p, min_p, repetition_penalty. The converter skips a
// file it cannot parse ("not all models have valid generation_config.json"), and so does Loom.
void add_generation_config(const std::filesystem::path& dir, gguf::GgufWriter& writer) {
  const std::filesystem::path path = dir / "generation_config.json";
  if (!std::filesystem::exists(path)) return;
  json g;
  try {
    g = read_json_file(path);
  } catch (const Error&) {
    return;
  }
  if (!g.is_object()) return;
  auto number = [&](const char* key) -> std::optional<double> {
    if (!g.contains(key) || !g[key].is_number()) return std::nullopt;
    return g[key].get<double>();
  };
  if (const auto v = number("temperature")) writer.set_float32("general.sampling.temp", float(*v));
  if (g.contains("top_k") && g["top_k"].is_number_integer()) writer.set_int32("general.sampling.top_k", g["top_k"].get<int32_t>());
  if (const auto v = number("top_p")) writer.set_float32("general.sampling.top_p", float(*v));
  if (const auto v = number("min_p")) writer.set_float32("general.sampling.min_p", float(*v));
  if (const auto v = number("repetition_penalty")) writer.set_float32("general.sampling.penalty_repeat", float(*v));
}

gguf::GgufFile open_family(const Family& family, const std::filesystem::path& dir, const json& config, const Wrapper* wrapper = nullptr) {
  auto shards = std::make_shared<Shards>();
  gguf::GgufWriter writer;
  const std::string a = std::string(family.arch) + ".";
  writer.set_string("general.architecture", family.arch);
  writer.set_string("general.name", model_name_of(dir));
  for (const ConfigKey& key : family.keys) {
    if (!key.required && (!config.contains(key.hf) || config[key.hf].is_null())) {
      if (!key.fallback) continue;
      if (key.kind == ConfigKey::Kind::f32) writer.set_float32(a + key.gguf, float(*key.fallback));
      else writer.set_uint32(a + key.gguf, uint32_t(*key.fallback));
      continue;
    }
    if (key.kind == ConfigKey::Kind::f32) {
      if (!config.contains(key.hf) || !config[key.hf].is_number())
        throw Error((dir / "config.json").string() + ": '" + key.hf + "' is missing or not a number");
      writer.set_float32(a + key.gguf, config[key.hf].get<float>());
    } else {
      writer.set_uint32(a + key.gguf, uint32_t(config_uint(config, dir, key.hf)));
    }
  }
  if (family.extra != nullptr) family.extra(dir, config, family.arch, writer);
  add_generation_config(dir, writer);
  const auto n_vocab = int64_t(config_uint(config, dir, "vocab_size"));
  switch (family.tokenizer) {
    case TokenizerKind::wordpiece: add_wordpiece_tokenizer(dir, writer, n_vocab); break;
    case TokenizerKind::bpe: add_bpe_tokenizer(dir, config, writer, n_vocab); break;
    case TokenizerKind::gemma4: add_bpe_tokenizer(dir, config, writer, n_vocab, BpeVocab::gemma4); break;
  }
  const std::optional<QuantScheme> scheme = quant_scheme_of(config, dir);
  if (scheme && scheme->method == QuantScheme::Method::mxfp4 && std::string_view(family.arch) != "gpt-oss")
    throw Error((dir / "config.json").string() + ": quantization method 'mxfp4' is read for gpt-oss's experts only");
  shards->files = open_shards(dir);  // after config.json and tokenizer.json: their errors come first
  std::vector<std::span<const uint8_t>> data = FolderTensors(family, wrapper, dir, config, scheme, writer, *shards).add_all();
  return gguf::GgufFile::with_external_data(writer.to_header_bytes(), std::move(data), shards, dir.string());
}

}  // namespace

bool is_checkpoint_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(path / "config.json", ec);
}

gguf::GgufFile open_checkpoint(const std::filesystem::path& dir) {
  if (!is_checkpoint_dir(dir)) throw Error(dir.string() + ": not a Hugging Face model folder (no config.json)");
  const json config = read_json_file(dir / "config.json");
  std::string type;
  try {
    type = config.value("model_type", std::string());
    if (const Family* family = find_family(type)) return open_family(*family, dir, config);
    if (const Wrapper* wrapper = find_wrapper(type)) {
      // The text model's config: the class defaults, then config.json's own keys (token ids, dtype),
      // then its text_config.
      json text = json::parse(wrapper->text_defaults);
      for (const auto& [key, value] : config.items())
        if (key != "text_config" && key != "vision_config" && key != "audio_config") text[key] = value;
      if (config.contains("text_config") && config["text_config"].is_object()) text.update(config["text_config"]);
      text["model_type"] = wrapper->text_model_type;
      return open_family(*find_family(wrapper->text_model_type), dir, text, wrapper);
    }
  } catch (const json::exception& e) {
    // A value of the wrong kind in config.json, tokenizer.json or tokenizer_config.json (a string where a
    // number belongs, a null list): the tables read them with nlohmann's typed accessors.
    throw Error(dir.string() + ": a value of the wrong type in its JSON files (" + e.what() + ")");
  }
  throw Error((dir / "config.json").string() + ": model_type '" + type + "' is not one Loom reads from a Hugging Face folder yet (" + family_names() +
              "); convert it with llama.cpp's convert_hf_to_gguf.py");
}

std::string model_name_of(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path.stem().string();
  std::filesystem::path p = path.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.filename() == "." || p.filename().empty()) p = std::filesystem::absolute(p, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

gguf::GgufFile open_model_file(const std::filesystem::path& path) {
  return is_checkpoint_dir(path) ? open_checkpoint(path) : gguf::GgufFile::open(path);
}

}  // namespace loom::hf
