// tokenizer.json's BPE as llama.cpp's "gpt2" or "llama" vocabulary, Unigram as its "t5" one
// (unigram_tokenizer_json.h), and the special ids and templates they share (tokenizer_json.h).

#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "hf/json_file.h"
#include "hf/pre_tokenizer_match.h"
#include "hf/tokenizer_json.h"
#include "hf/unigram_tokenizer_json.h"

namespace loom::hf {

using nlohmann::json;

namespace {

// llama.cpp's token types.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
constexpr const char* kSpaceMark = "\xe2\x96\x81";  // U+2581, SentencePiece's space
// The score of a piece no merge makes: below every merge's, so SentencePiece's merging reaches it last.
constexpr float kNeverMerged = -1e9f;

// Added tokens the converter makes control tokens even when tokenizer.json does not mark them special.
bool looks_special(const std::string& t) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || wrapped("<|", "|>") || wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || t.starts_with("<start_of_") ||
         t.starts_with("<end_of_");
}

bool has_byte_level_step(const json& node) {
  if (!node.is_object()) return false;
  if (node.value("type", std::string()) == "ByteLevel") return true;
  for (const char* list : {"pretokenizers", "decoders"})
    if (node.contains(list) && node[list].is_array())
      for (const json& step : node[list])
        if (has_byte_level_step(step)) return true;
  return false;
}

// A tokenizer_config.json token entry: "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

// config.json's id for a token: a number, or the first of a list (several eos ids).
std::optional<int64_t> config_id(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
  return std::nullopt;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The chat template: chat_template.jinja (transformers' current layout), else tokenizer_config.json's
// chat_template, a string or a list of named templates ("default" and the rest by name, as llama.cpp's
// tokenizer.chat_template.<name>), else chat_template.json's.
void add_chat_templates(const std::filesystem::path& dir, const json& tok_config, gguf::GgufWriter& writer) {
  if (std::filesystem::exists(dir / "chat_template.jinja")) {
    writer.set_string("tokenizer.chat_template", read_text_file(dir / "chat_template.jinja"));
    return;
  }
  // A multimodal model's processor keeps it in chat_template.json (Gemma 3, Qwen2-VL releases).
  if (!tok_config.contains("chat_template") && std::filesystem::exists(dir / "chat_template.json")) {
    const json processor = read_json_file(dir / "chat_template.json");
    if (processor.contains("chat_template") && processor["chat_template"].is_string())
      writer.set_string("tokenizer.chat_template", processor["chat_template"].get<std::string>());
    return;
  }
  if (!tok_config.contains("chat_template")) return;
  const json& t = tok_config["chat_template"];
  if (t.is_string()) {
    writer.set_string("tokenizer.chat_template", t.get<std::string>());
    return;
  }
  if (!t.is_array()) throw Error((dir / "tokenizer_config.json").string() + ": chat_template is neither text nor a list of named templates");
  for (const json& named : t) {
    const std::string name = named.value("name", std::string()), text = named.value("template", std::string());
    if (name.empty() || text.empty()) throw Error((dir / "tokenizer_config.json").string() + ": a chat_template entry without a name or a template");
    writer.set_string(name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name, text);
  }
}

// True when the post-processor's single-sequence template starts (at_end: ends) with the token.
bool template_adds(const json& post, const std::string& token, bool at_end = false) {
  if (!post.is_object()) return false;
  if (post.value("type", std::string()) == "Sequence") {
    for (const json& step : post.value("processors", json::array()))
      if (template_adds(step, token, at_end)) return true;
    return false;
  }
  if (post.value("type", std::string()) != "TemplateProcessing") return false;
  const json single = post.value("single", json::array());
  if (single.empty()) return false;
  const json& piece = at_end ? single.back() : single.front();
  return piece.contains("SpecialToken") && piece["SpecialToken"].value("id", std::string()) == token;
}

// The parts of a BPE vocabulary both kinds share: pieces by id (ids the file lacks up to config.json's
// vocab_size are "[PAD<id>]", unused), each piece's type before byte and unknown tokens are marked,
// and the id of every piece and added token.
struct Pieces {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::map<std::string, int64_t> id_of;
};

Pieces read_pieces(const json& tok, const std::string& file, int64_t n_vocab) {
  Pieces p;
  p.tokens.resize(static_cast<size_t>(n_vocab));
  p.types.assign(static_cast<size_t>(n_vocab), kUnused);
  const json vocab = tok.value("model", json::object()).value("vocab", json::object());
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab)
      throw Error(file + ": vocab entry '" + piece + "' has an id outside 0.." + std::to_string(n_vocab - 1) + " (config.json's vocab_size)");
    p.tokens[size_t(id.get<int64_t>())] = piece;
    p.types[size_t(id.get<int64_t>())] = kNormal;
    p.id_of[piece] = id.get<int64_t>();
  }
  for (const json& added : tok.value("added_tokens", json::array())) {
    const int64_t id = added.value("id", int64_t(-1));
    const std::string content = added.value("content", std::string());
    if (id < 0 || id >= n_vocab) throw Error(file + ": added token '" + content + "' has an id outside 0.." + std::to_string(n_vocab - 1));
    p.tokens[size_t(id)] = content;
    p.types[size_t(id)] = added.value("special", false) || looks_special(content) ? kControl : kUserDefined;
    p.id_of[content] = id;
  }
  for (size_t i = 0; i < p.tokens.size(); i++)
    if (p.types[i] == kUnused) p.tokens[i] = "[PAD" + std::to_string(i) + "]";
  return p;
}

std::vector<std::pair<std::string, std::string>> read_merges(const json& model, const std::string& file) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (const json& merge : model.value("merges", json::array())) {
    if (merge.is_string()) {
      const std::string m = merge.get<std::string>();
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) throw Error(file + ": merge '" + m + "' is not two pieces");
      merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      throw Error(file + ": a merge that is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return merges;
}

// GPT-2's byte-level scheme as llama.cpp's "gpt2" model.
void add_byte_level_vocab(const json& tok, const std::string& file, gguf::GgufWriter& writer, Pieces& pieces) {
  const json model = tok.value("model", json::object());
  if (!(has_byte_level_step(tok.value("pre_tokenizer", json())) || has_byte_level_step(tok.value("decoder", json()))))
    throw Error(file + ": a BPE tokenizer that is neither byte-level nor SentencePiece-style (byte fallback)");
  const json normalizer = tok.value("normalizer", json());
  // NFC (Qwen's) is left out as llama.cpp leaves it: text arrives composed in practice.
  if (!normalizer.is_null() && normalizer.value("type", std::string()) != "NFC")
    throw Error(file + ": normalizer '" + normalizer.value("type", std::string()) + "' in a byte-level BPE tokenizer (Loom reads none or NFC)");
  std::vector<std::string> merges;
  for (const auto& [a, b] : read_merges(model, file)) merges.push_back(a + " " + b);
  const std::vector<std::string> patterns = byte_level_split_patterns(tok.value("pre_tokenizer", json()), file);
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", matching_pre_tokenizer(patterns, model.value("ignore_merges", false), file));
  writer.set_string_array("tokenizer.ggml.tokens", pieces.tokens);
  writer.set_int32_array("tokenizer.ggml.token_type", pieces.types);
  writer.set_string_array("tokenizer.ggml.merges", merges);
}

// A Split that isolates runs of newlines from the rest (Gemma 4's pre-tokenizer: llama.cpp's "gemma4"
// splits so, and SentencePiece pieces hold no newline beside other characters).
bool splits_newline_runs(const json& pre) {
  if (pre.value("type", std::string()) != "Split" || pre.value("behavior", std::string("Isolated")) != "Isolated" || pre.value("invert", false))
    return false;
  std::string pattern = pre.value("pattern", json::object()).value("Regex", std::string());
  for (size_t at; (at = pattern.find('\n')) != std::string::npos;) pattern.replace(at, 1, "\\n");
  for (const char* known : {"\\n+", "[\\n]+", "[^\\n]+|[\\n]+", "[\\n]+|[^\\n]+", "[^\\n]+|\\n+", "\\n+|[^\\n]+"})
    if (pattern == known) return true;
  return false;
}

// What the SentencePiece-style normalizer and pre-tokenizer do, which must be SentencePiece's own:
// spaces become U+2581, and a U+2581 is prepended (or not). Returns whether it is prepended.
bool sentencepiece_space_prefix(const json& tok, const std::string& file, bool newline_split_ok = false) {
  bool prepends = false, replaces = false;
  const std::function<void(const json&)> normalizer = [&](const json& n) {
    const std::string type = n.value("type", std::string());
    if (type == "Sequence") {
      for (const json& step : n.value("normalizers", json::array())) normalizer(step);
    } else if (type == "Prepend" && n.value("prepend", std::string()) == kSpaceMark) {
      prepends = true;
    } else if (type == "Replace" && n.value("pattern", json::object()).value("String", std::string()) == " " &&
               n.value("content", std::string()) == kSpaceMark) {
      replaces = true;
    } else {
      throw Error(file + ": normalizer '" + type + "' in a SentencePiece-style tokenizer (Loom reads Prepend and Replace of spaces by U+2581)");
    }
  };
  const json norm = tok.value("normalizer", json());
  if (!norm.is_null()) normalizer(norm);
  const json pre = tok.value("pre_tokenizer", json());
  if (!pre.is_null()) {
    const std::string type = pre.value("type", std::string());
    if (type == "Metaspace" && pre.value("replacement", std::string(kSpaceMark)) == kSpaceMark) {
      replaces = true;
      const std::string scheme = pre.value("prepend_scheme", std::string(pre.value("add_prefix_space", true) ? "always" : "never"));
      if (scheme != "never") prepends = true;
    } else if (!(type == "Split" && replaces && pre.value("pattern", json::object()).value("String", std::string()) == " ") &&
               !(newline_split_ok && splits_newline_runs(pre))) {
      // Gemma's Split on " " finds none once the normalizer has replaced them: a no-op.
      throw Error(file + ": pre-tokenizer '" + type + "' in a SentencePiece-style tokenizer (Loom reads none, Metaspace, a Split on spaces "
                  "already replaced" + std::string(newline_split_ok ? ", or a Split of newline runs from the rest)" : ")"));
    }
  }
  if (!replaces) throw Error(file + ": a SentencePiece-style tokenizer that does not replace spaces by U+2581");
  return prepends;
}

// <0xNN> pieces are byte tokens, and the model's unk_token the unknown one.
void mark_byte_and_unknown_pieces(Pieces& pieces, const std::string& unk) {
  for (size_t i = 0; i < pieces.tokens.size(); i++) {
    const std::string& t = pieces.tokens[i];
    if (pieces.types[i] != kNormal) continue;
    if (t.size() == 6 && t.starts_with("<0x") && t.ends_with(">") && std::isxdigit(uint8_t(t[3])) && std::isxdigit(uint8_t(t[4]))) pieces.types[i] = kByte;
    else if (!unk.empty() && t == unk) pieces.types[i] = kUnknown;
  }
}

// SentencePiece's BPE exported as tokenizer.json (Llama 2, Mistral, Gemma, Phi-3: byte fallback, pieces
// with U+2581) as llama.cpp's "llama" model. The file has merges, not SentencePiece's scores; a piece's
// score is minus the rank of the first merge that makes it. Merging by those scores is merging by rank:
// the exporter writes every split of every piece, in the order of the pieces' scores. (llama.cpp's
// converter, without tokenizer.model, gives every piece -1000, which merges left to right instead.)
void add_sentencepiece_vocab(const json& tok, const std::string& file, gguf::GgufWriter& writer, Pieces& pieces) {
  const json model = tok.value("model", json::object());
  const bool space_prefix = sentencepiece_space_prefix(tok, file);
  const auto merges = read_merges(model, file);
  std::vector<float> scores(pieces.tokens.size(), kNeverMerged);
  for (size_t rank = 0; rank < merges.size(); rank++) {
    const auto it = pieces.id_of.find(merges[rank].first + merges[rank].second);
    if (it == pieces.id_of.end()) throw Error(file + ": merge '" + merges[rank].first + " " + merges[rank].second + "' makes no piece of the vocabulary");
    float& score = scores[size_t(it->second)];
    if (score == kNeverMerged) score = -float(rank + 1);
  }
  mark_byte_and_unknown_pieces(pieces, model.value("unk_token", std::string()));
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string_array("tokenizer.ggml.tokens", pieces.tokens);
  writer.set_float32_array("tokenizer.ggml.scores", scores);
  writer.set_int32_array("tokenizer.ggml.token_type", pieces.types);
  writer.set_bool("tokenizer.ggml.add_space_prefix", space_prefix);
}

// Gemma 4's SentencePiece-style BPE as llama.cpp's "gemma4" model (the converter's Gemma4Model.set_vocab):
// pieces as stored with <0xNN> byte tokens, merges by rank, no space prefix. The chat format's markers
// (channels, tool calls and responses, the string quote) are user-defined tokens, so that they render.
void add_gemma4_vocab(const json& tok, const std::string& file, gguf::GgufWriter& writer, Pieces& pieces) {
  const json model = tok.value("model", json::object());
  if (!model.value("byte_fallback", false)) throw Error(file + ": Gemma 4's tokenizer is SentencePiece-style BPE with byte fallback; this one has none");
  if (sentencepiece_space_prefix(tok, file, true)) throw Error(file + ": this tokenizer prepends a space, which Gemma 4's does not");
  std::vector<std::string> merges;
  for (const auto& [a, b] : read_merges(model, file)) merges.push_back(a + " " + b);
  mark_byte_and_unknown_pieces(pieces, model.value("unk_token", std::string()));
  for (const char* visible : {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"}) {
    const auto it = pieces.id_of.find(visible);
    if (it != pieces.id_of.end()) pieces.types[size_t(it->second)] = kUserDefined;
  }
  writer.set_string("tokenizer.ggml.model", "gemma4");
  writer.set_string_array("tokenizer.ggml.tokens", pieces.tokens);
  writer.set_int32_array("tokenizer.ggml.token_type", pieces.types);
  writer.set_string_array("tokenizer.ggml.merges", merges);
  writer.set_bool("tokenizer.ggml.add_space_prefix", false);
}

}  // namespace

void add_bpe_tokenizer(const std::filesystem::path& dir, const json& config, gguf::GgufWriter& writer, int64_t n_vocab, BpeVocab vocab) {
  const std::filesystem::path path = dir / "tokenizer.json";
  const std::string file = path.string();
  const json tok = read_json_file(path);
  const json model = tok.value("model", json::object());
  const std::string type = model.value("type", std::string());
  if (type != "BPE" && type != "Unigram")
    throw Error(file + ": model type '" + type + "' (Loom reads BPE tokenizers, byte-level or SentencePiece-style, and Unigram ones for this family)");
  Pieces pieces;
  if (type == "Unigram") {
    pieces.id_of = add_unigram_vocab(tok, file, writer, n_vocab);
  } else {
    pieces = read_pieces(tok, file, n_vocab);
    if (vocab == BpeVocab::gemma4) add_gemma4_vocab(tok, file, writer, pieces);
    else if (model.value("byte_fallback", false)) add_sentencepiece_vocab(tok, file, writer, pieces);
    else add_byte_level_vocab(tok, file, writer, pieces);
  }
  const auto& id_of = pieces.id_of;

  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  json tok_config = std::filesystem::exists(config_path) ? read_json_file(config_path) : json::object();
  std::optional<std::string> bos_text, eos_text;
  const auto special = [&](const char* name, const char* config_key, const char* gguf_key) {
    std::optional<int64_t> id;
    if (const auto text = token_text(tok_config, name)) {
      const auto it = id_of.find(*text);
      if (it == id_of.end()) throw Error(config_path.string() + ": " + name + " '" + *text + "' is not a token of tokenizer.json");
      id = it->second;
      if (std::string_view(name) == "bos_token") bos_text = *text;
      if (std::string_view(name) == "eos_token") eos_text = *text;
    } else if (config_key != nullptr) {
      id = config_id(config, config_key);
    }
    if (id && *id >= 0 && *id < n_vocab) writer.set_uint32(gguf_key, uint32_t(*id));
  };
  special("bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id");
  special("eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id");
  if (!token_text(tok_config, "unk_token") && model.contains("unk_token") && model["unk_token"].is_string())
    tok_config["unk_token"] = model["unk_token"];  // SentencePiece-style files name it in the model
  const json unk_id = model.value("unk_id", json());  // Unigram files by id
  if (!token_text(tok_config, "unk_token") && unk_id.is_number_integer() && unk_id.get<int64_t>() >= 0 &&
      size_t(unk_id.get<int64_t>()) < model.value("vocab", json::array()).size())
    tok_config["unk_token"] = model["vocab"][size_t(unk_id.get<int64_t>())][0];
  special("unk_token", nullptr, "tokenizer.ggml.unknown_token_id");
  special("pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id");
  if (tok_config.contains("add_bos_token") && tok_config["add_bos_token"].is_boolean())
    writer.set_bool("tokenizer.ggml.add_bos_token", tok_config["add_bos_token"].get<bool>());
  else
    writer.set_bool("tokenizer.ggml.add_bos_token", bos_text.has_value() && template_adds(tok.value("post_processor", json()), *bos_text));
  if (tok_config.contains("add_eos_token") && tok_config["add_eos_token"].is_boolean())
    writer.set_bool("tokenizer.ggml.add_eos_token", tok_config["add_eos_token"].get<bool>());
  else
    writer.set_bool("tokenizer.ggml.add_eos_token", eos_text.has_value() && template_adds(tok.value("post_processor", json()), *eos_text, true));
  add_chat_templates(dir, tok_config, writer);
}

}  // namespace loom::hf
