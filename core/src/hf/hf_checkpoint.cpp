#include "hf/hf_checkpoint.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "hf/hf_family.h"
#include "hf/json_file.h"
#include "hf/safetensors_file.h"
#include "hf/tokenizer_json.h"

namespace loom::hf {

namespace {

using nlohmann::json;

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

uint64_t config_uint(const json& config, const std::filesystem::path& dir, const char* key) {
  if (!config.contains(key) || !config[key].is_number_unsigned())
    throw Error((dir / "config.json").string() + ": '" + key + "' is missing or not a non-negative integer");
  return config[key].get<uint64_t>();
}

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

gguf::GgufFile open_family(const Family& family, const std::filesystem::path& dir, const json& config) {
  auto shards = std::make_shared<Shards>();
  shards->files = open_shards(dir);
  gguf::GgufWriter writer;
  const std::string a = std::string(family.arch) + ".";
  writer.set_string("general.architecture", family.arch);
  writer.set_string("general.name", model_name_of(dir));
  for (const ConfigKey& key : family.keys) {
    if (!key.required && !config.contains(key.hf)) {
      if (key.kind == ConfigKey::Kind::f32) writer.set_float32(a + key.gguf, float(key.fallback));
      else writer.set_uint32(a + key.gguf, uint32_t(key.fallback));
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
  if (family.extra != nullptr) family.extra(dir, config, writer);
  const auto n_vocab = int64_t(config_uint(config, dir, "vocab_size"));
  switch (family.tokenizer) {
    case TokenizerKind::wordpiece: add_wordpiece_tokenizer(dir, writer, n_vocab); break;
  }

  std::vector<std::span<const uint8_t>> data;
  auto add = [&](const std::string& hf_name, const std::string& gguf_name) {
    const SafeTensor* t = shards->find(hf_name);
    if (t == nullptr && family.prefix != nullptr) t = shards->find(family.prefix + hf_name);
    if (t == nullptr) throw Error(dir.string() + ": tensor '" + hf_name + "' is missing from the safetensors");
    const int dtype = safetensors_dtype(t->dtype);
    if (dtype < 0) throw Error(dir.string() + ": tensor '" + t->name + "' has dtype " + t->dtype + " (Loom reads F32, F16 and BF16 weights)");
    std::vector<int64_t> dims(t->shape.rbegin(), t->shape.rend());  // PyTorch's [out, in] is GGUF's [in, out]
    writer.add_tensor_info(gguf_name, loom_dtype(dtype), dims);
    data.push_back(t->data);
  };
  const auto n_layers = int64_t(config_uint(config, dir, family.layer_count));
  for (const TensorName& name : family.tensors) {
    if (std::string(name.hf).find("{}") == std::string::npos) {
      add(name.hf, name.gguf);
      continue;
    }
    for (int64_t il = 0; il < n_layers; il++) add(with_index(name.hf, il), with_index(name.gguf, il));
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
  const json config = read_json_file(dir / "config.json");
  const std::string type = config.value("model_type", std::string());
  if (const Family* family = find_family(type)) return open_family(*family, dir, config);
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
