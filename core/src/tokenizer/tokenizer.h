// Tokenizer — text <-> token ids for a model, built from the tokenizer.ggml.* keys of its GGUF file.
//
// Four algorithms, chosen by tokenizer.ggml.model: "llama" (SentencePiece, e.g. Llama 2, Gemma), "gpt2"
// (byte-level BPE, e.g. GPT-2, Llama 3, Qwen 2, StarCoder; the pre-tokenizer is chosen by
// tokenizer.ggml.pre; "gemma4" is BPE over UTF-8 pieces), "bert" (WordPiece) and "t5" (SentencePiece's
// unigram model: T5, XLM-RoBERTa). Results match llama.cpp id for id. Immutable after construction: every const
// method may be called from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unigram_encode.h"
#include "tokenizer/vocab.h"

namespace loom::gguf {
class GgufFile;
}

namespace loom {

class Tokenizer {
 public:
  // loom::Error naming the key when the metadata is missing, malformed or of an unsupported kind.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  static std::unique_ptr<Tokenizer> from_vocab(tokenizer::VocabData data);

  // add_special: BOS/EOS as the model asks (tokenizer.ggml.add_bos_token / add_eos_token).
  // parse_special: text spelling a control token (e.g. "<start_of_turn>") becomes that token;
  // user-defined tokens are always matched verbatim.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Raw bytes of one token: byte tokens decode to their byte, "▁"/"Ġ" to spaces. A piece may be a
  // partial UTF-8 sequence (use StreamingDecoder to print safely). Control tokens give their text
  // when render_special, else "".
  std::string token_to_piece(int32_t id, bool render_special = true) const;
  // Concatenated pieces; SentencePiece's leading space (add_space_prefix) is removed from the start.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const { return vocab_.n_tokens(); }
  int32_t bos_id() const { return vocab_.data.bos_id; }  // -1 when the model has none
  int32_t eos_id() const { return vocab_.data.eos_id; }
  int32_t eot_id() const { return vocab_.data.eot_id; }
  int32_t unk_id() const { return vocab_.data.unk_id; }
  int32_t pad_id() const { return vocab_.data.pad_id; }
  bool add_bos() const { return vocab_.data.add_bos; }
  bool add_eos() const { return vocab_.data.add_eos; }
  int32_t sep_id() const { return vocab_.data.sep_id; }  // WordPiece's [SEP]; -1 when the model has none
  bool add_sep() const { return vocab_.data.add_sep; }
  bool add_space_prefix() const { return vocab_.data.add_space_prefix; }
  tokenizer::VocabKind kind() const { return vocab_.data.kind; }
  const std::string& pre() const { return vocab_.data.pre; }

  // True for EOS, EOT, EOM and turn-ending control tokens such as <end_of_turn> or <|im_end|>.
  bool is_end_of_generation(int32_t id) const;
  const std::vector<int32_t>& end_of_generation_ids() const { return vocab_.eog_ids; }

  // The token's stored text (no unescaping); loom::Error when id is out of range.
  const std::string& token_text(int32_t id) const;
  tokenizer::TokenType token_type(int32_t id) const;
  int32_t find_token(std::string_view text) const { return vocab_.find(text); }  // -1 when absent

 private:
  explicit Tokenizer(tokenizer::VocabData data);

  struct Fragment {
    int32_t token_id;  // >= 0: a special token; -1: raw text [begin, begin + length)
    size_t begin;
    size_t length;
  };
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  tokenizer::Vocab vocab_;
  tokenizer::PreTokenizer pre_;
  std::unique_ptr<tokenizer::UnigramModel> unigram_;  // the "t5" kind's trie and character map
  // Special-token texts grouped by first byte, then by length, for one-pass matching.
  std::vector<std::vector<size_t>> special_lengths_by_byte_;
  // For each first byte, which second bytes any special text of 2+ bytes has (a cheap pre-filter).
  std::vector<std::vector<bool>> special_second_bytes_;
  tokenizer::StringIdMap special_by_text_;  // text -> rank in vocab_.special_ids
};

}  // namespace loom
