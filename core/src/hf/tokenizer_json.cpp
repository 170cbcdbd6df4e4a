#include "hf/tokenizer_json.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "hf/json_file.h"

namespace loom::hf {

using nlohmann::json;

void add_wordpiece_tokenizer(const std::filesystem::path& dir, gguf::GgufWriter& writer, int64_t n_vocab) {
  const std::filesystem::path path = dir / "tokenizer.json";
  const json tok = read_json_file(path);
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
  const json config = std::filesystem::exists(dir / "tokenizer_config.json") ? read_json_file(dir / "tokenizer_config.json") : json::object();
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

}  // namespace loom::hf
