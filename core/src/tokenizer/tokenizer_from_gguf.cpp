// Reading a Tokenizer from the tokenizer.ggml.* keys of a GGUF file.
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace loom {

using tokenizer::TokenType;
using tokenizer::VocabData;
using tokenizer::VocabKind;

namespace {

// Special ids that do not fit the vocabulary are ignored rather than fatal, as llama.cpp does:
// several published files carry stale ids and still work.
int32_t read_id(const gguf::GgufFile& file, std::string_view key, int32_t fallback, size_t n_tokens) {
  const std::optional<int64_t> value = file.get_int(key);
  if (!value) return fallback;
  if (*value < 0 || static_cast<uint64_t>(*value) >= n_tokens) return -1;
  return static_cast<int32_t>(*value);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  const auto where = [&](std::string_view key) { return file.label() + ": " + std::string(key); };
  const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model) throw Error(where("tokenizer.ggml.model") + " is missing; the file carries no tokenizer");

  VocabData data;
  if (*model == "llama") {
    data.kind = VocabKind::spm;
  } else if (*model == "gpt2") {
    data.kind = VocabKind::bpe;
  } else if (*model == "gemma4") {
    data.kind = VocabKind::bpe;
    data.byte_level = false;
  } else if (*model == "bert") {
    data.kind = VocabKind::wpm;
  } else if (*model == "t5") {
    data.kind = VocabKind::ugm;
  } else {
    throw Error(where("tokenizer.ggml.model") + " = '" + *model +
                "' is not supported (Loom implements 'llama' (SentencePiece), 'gpt2' (byte-level BPE), 'gemma4' "
                "(BPE over UTF-8 pieces), 'bert' (WordPiece) and 't5' (unigram))");
  }
  data.pre = file.get_string("tokenizer.ggml.pre").value_or("default");
  // Gemma 4's files name no pre-tokenizer: its tokenizer.json splits newline runs from the rest.
  if (*model == "gemma4") data.pre = "gemma4";
  data.tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (data.tokens.empty()) throw Error(where("tokenizer.ggml.tokens") + " is missing or empty");
  data.scores = file.get_float_array("tokenizer.ggml.scores");
  for (int64_t type : file.get_int_array("tokenizer.ggml.token_type")) {
    if (type < 0 || type > 6) {
      throw Error(where("tokenizer.ggml.token_type") + " holds " + std::to_string(type) + ", expected 0..6");
    }
    data.types.push_back(static_cast<TokenType>(type));
  }
  data.merges = file.get_string_array("tokenizer.ggml.merges");

  const bool spm = data.kind == VocabKind::spm;
  const size_t n = data.tokens.size();
  if (data.kind == VocabKind::ugm) {
    for (int64_t byte : file.get_int_array("tokenizer.ggml.precompiled_charsmap")) {
      if (byte < 0 || byte > 255) throw Error(where("tokenizer.ggml.precompiled_charsmap") + " holds " + std::to_string(byte) + ", not a byte");
      data.precompiled_charsmap.push_back(static_cast<uint8_t>(byte));
    }
    data.remove_extra_whitespaces = file.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    data.metaspace = file.get_bool("tokenizer.ggml.loom.metaspace").value_or(false);
    data.byte_fallback = file.get_bool("tokenizer.ggml.loom.byte_fallback").value_or(false);
    if (data.scores.size() != n) throw Error(where("tokenizer.ggml.scores") + " must give every token a score in a unigram (t5) vocabulary");
  }
  // SentencePiece models have fixed defaults for ids they do not state (llama.cpp's choice too).
  data.bos_id = read_id(file, "tokenizer.ggml.bos_token_id", spm && n > 1 ? 1 : -1, n);
  data.eos_id = read_id(file, "tokenizer.ggml.eos_token_id", spm && n > 2 ? 2 : -1, n);
  data.eot_id = read_id(file, "tokenizer.ggml.eot_token_id", -1, n);
  data.eom_id = read_id(file, "tokenizer.ggml.eom_token_id", -1, n);
  data.unk_id = read_id(file, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  data.pad_id = read_id(file, "tokenizer.ggml.padding_token_id", -1, n);
  data.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(spm);
  if (*model == "gemma4") data.add_bos = true;  // Gemma 4 always starts with <bos>, whatever the file says
  data.add_eos = file.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  const bool ugm = data.kind == VocabKind::ugm;
  // T5's fixed ids unless stated (llama.cpp's): no BOS, </s> 1, <unk> 2, <pad> 0.
  if (ugm) {
    data.bos_id = read_id(file, "tokenizer.ggml.bos_token_id", -1, n);
    data.eos_id = read_id(file, "tokenizer.ggml.eos_token_id", n > 1 ? 1 : -1, n);
    data.unk_id = read_id(file, "tokenizer.ggml.unknown_token_id", n > 2 ? 2 : -1, n);
    data.pad_id = read_id(file, "tokenizer.ggml.padding_token_id", 0, n);
    data.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
    data.add_eos = file.get_bool("tokenizer.ggml.add_eos_token").value_or(true);
  }
  data.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm || ugm);
  if (!spm && !ugm) data.add_space_prefix = false;  // BPE encodes spaces itself
  if (data.kind == VocabKind::wpm) {
    // BERT's fixed ids unless stated: [CLS] 101 starts, [SEP] 102 ends, [UNK] 100, [PAD] 0.
    data.bos_id = read_id(file, "tokenizer.ggml.bos_token_id", n > 101 ? 101 : -1, n);
    data.sep_id = read_id(file, "tokenizer.ggml.seperator_token_id", n > 102 ? 102 : -1, n);
    data.unk_id = read_id(file, "tokenizer.ggml.unknown_token_id", n > 100 ? 100 : -1, n);
    data.pad_id = read_id(file, "tokenizer.ggml.padding_token_id", 0, n);
    data.add_bos = true;
    data.add_sep = true;
    data.wpm_lowercase = file.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
    data.wpm_strip_accents = file.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(data.wpm_lowercase);
  }

  // Turn-end tokens named by text, when the file does not say which id ends a turn.
  if (data.eot_id < 0) {
    for (std::string_view text : {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<EOT>"}) {
      for (size_t id = 0; id < n; ++id) {
        if (data.tokens[id] == text) {
          data.eot_id = static_cast<int32_t>(id);
          break;
        }
      }
      if (data.eot_id >= 0) break;
    }
  }
  return from_vocab(std::move(data));
}

}  // namespace loom
