#include "hf/unigram_tokenizer_json.h"

#include <cctype>
#include <functional>
#include <vector>

#include "common/base64.h"
#include "common/error.h"

namespace loom::hf {

using nlohmann::json;

namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
constexpr const char* kSpaceMark = "\xe2\x96\x81";  // U+2581

struct SpaceHandling {
  std::vector<uint8_t> charsmap;
  bool collapse = false;  // runs of spaces become one
  bool prefix = false;    // U+2581 before the text
  bool metaspace = true;  // tokenizers' Metaspace (a trailing space stays); false: SentencePiece's
};

// The normalizer: Precompiled (SentencePiece's character map), and Replace(" {2,}", " ").
void read_normalizer(const json& n, const std::string& file, SpaceHandling& s) {
  if (n.is_null()) return;
  const std::string type = n.value("type", std::string());
  if (type == "Sequence") {
    for (const json& step : n.value("normalizers", json::array())) read_normalizer(step, file, s);
  } else if (type == "Precompiled") {
    const json map = n.value("precompiled_charsmap", json());
    if (map.is_string()) s.charsmap = decode_base64(map.get<std::string>(), file + ": the Precompiled normalizer's precompiled_charsmap");
  } else if (type == "Replace" && n.value("pattern", json::object()).value("Regex", std::string()) == " {2,}" &&
             n.value("content", std::string()) == " ") {
    s.collapse = true;
  } else {
    throw Error(file + ": normalizer '" + type + "' in a Unigram tokenizer (Loom reads Precompiled and Replace(\" {2,}\", \" \"))");
  }
}

// The pre-tokenizer: Metaspace, or T5's WhitespaceSplit then Metaspace (words without their spaces:
// SentencePiece's stripping and collapsing).
void read_pre_tokenizer(const json& p, const std::string& file, SpaceHandling& s) {
  if (p.is_null()) return;
  const std::string type = p.value("type", std::string());
  if (type == "Sequence") {
    for (const json& step : p.value("pretokenizers", json::array())) read_pre_tokenizer(step, file, s);
  } else if (type == "WhitespaceSplit") {
    s.collapse = true;
    s.metaspace = false;
  } else if (type == "Metaspace" && p.value("replacement", std::string(kSpaceMark)) == kSpaceMark) {
    const std::string scheme = p.value("prepend_scheme", std::string(p.value("add_prefix_space", true) ? "always" : "never"));
    s.prefix = scheme != "never";
  } else {
    throw Error(file + ": pre-tokenizer '" + type + "' in a Unigram tokenizer (Loom reads Metaspace and WhitespaceSplit)");
  }
}

bool is_byte_piece(const std::string& t) {
  return t.size() == 6 && t.starts_with("<0x") && t.ends_with(">") && std::isxdigit(uint8_t(t[3])) && std::isxdigit(uint8_t(t[4]));
}

}  // namespace

std::map<std::string, int64_t> add_unigram_vocab(const json& tok, const std::string& file, gguf::GgufWriter& writer, int64_t n_vocab) {
  const json model = tok.value("model", json::object());
  const json vocab = model.value("vocab", json::array());
  if (!vocab.is_array()) throw Error(file + ": a Unigram model's vocab is not a list of [piece, score]");
  if (int64_t(vocab.size()) > n_vocab)
    throw Error(file + ": " + std::to_string(vocab.size()) + " pieces, more than config.json's vocab_size " + std::to_string(n_vocab));
  std::vector<std::string> tokens(static_cast<size_t>(n_vocab));
  std::vector<float> scores(size_t(n_vocab), 0.0f);
  std::vector<int32_t> types(size_t(n_vocab), kUnused);
  std::map<std::string, int64_t> id_of;
  const bool byte_fallback = model.value("byte_fallback", false);
  for (size_t id = 0; id < vocab.size(); id++) {
    const json& entry = vocab[id];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
      throw Error(file + ": vocab entry " + std::to_string(id) + " is not [piece, score]");
    tokens[id] = entry[0].get<std::string>();
    scores[id] = entry[1].get<float>();
    types[id] = byte_fallback && is_byte_piece(tokens[id]) ? kByte : kNormal;
    id_of.emplace(tokens[id], int64_t(id));
  }
  const json unk = model.value("unk_id", json());
  if (unk.is_number_integer()) {
    const int64_t id = unk.get<int64_t>();
    if (id < 0 || id >= int64_t(vocab.size())) throw Error(file + ": unk_id " + std::to_string(id) + " is not a piece of the vocabulary");
    types[size_t(id)] = kUnknown;  // its id is written with the other special ids (tokenizer_json.h)
  }
  for (const json& added : tok.value("added_tokens", json::array())) {
    const int64_t id = added.value("id", int64_t(-1));
    const std::string content = added.value("content", std::string());
    if (id < 0 || id >= n_vocab) throw Error(file + ": added token '" + content + "' has an id outside 0.." + std::to_string(n_vocab - 1));
    tokens[size_t(id)] = content;
    if (types[size_t(id)] != kUnknown) types[size_t(id)] = added.value("special", false) ? kControl : kUserDefined;
    id_of[content] = id;
  }
  for (size_t i = 0; i < tokens.size(); i++)
    if (types[i] == kUnused && tokens[i].empty()) tokens[i] = "[PAD" + std::to_string(i) + "]";

  SpaceHandling spaces;
  read_normalizer(tok.value("normalizer", json()), file, spaces);
  read_pre_tokenizer(tok.value("pre_tokenizer", json()), file, spaces);
  writer.set_string("tokenizer.ggml.model", "t5");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_float32_array("tokenizer.ggml.scores", scores);
  writer.set_int32_array("tokenizer.ggml.token_type", types);
  writer.set_bool("tokenizer.ggml.add_space_prefix", spaces.prefix);
  writer.set_bool("tokenizer.ggml.remove_extra_whitespaces", spaces.collapse);
  if (!spaces.charsmap.empty()) writer.set_uint8_array("tokenizer.ggml.precompiled_charsmap", std::move(spaces.charsmap));
  writer.set_bool("tokenizer.ggml.loom.metaspace", spaces.metaspace);
  writer.set_bool("tokenizer.ggml.loom.byte_fallback", byte_fallback);
  return id_of;
}

}  // namespace loom::hf
