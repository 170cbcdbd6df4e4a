// Vocabulary: what a tokenizer is built from (VocabData, as stored in tokenizer.ggml.* GGUF keys) and
// the lookup structures the algorithms need (Vocab).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::tokenizer {

// Values of tokenizer.ggml.token_type (same numbering as llama.cpp / SentencePiece).
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,       // <s>, <|im_end|>: never produced from text unless parse_special
  user_defined = 4,  // always matched verbatim in text before the model's algorithm runs
  unused = 5,
  byte = 6,          // <0x0A>: SentencePiece byte fallback
};

enum class VocabKind {
  spm,  // tokenizer.ggml.model = "llama": SentencePiece, score-based merges
  bpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE, rank-based merges
  wpm,  // tokenizer.ggml.model = "bert": WordPiece, greedy longest pieces
  ugm,  // tokenizer.ggml.model = "t5": SentencePiece's unigram model, the best-scoring segmentation
};

struct VocabData {
  VocabKind kind = VocabKind::spm;
  std::string pre = "default";       // tokenizer.ggml.pre (BPE pre-tokenizer)
  std::vector<std::string> tokens;   // token text as stored (SPM: spaces as U+2581; BPE: byte-mapped)
  std::vector<float> scores;         // SPM merge priority; may be empty for BPE
  std::vector<TokenType> types;      // empty means all normal
  std::vector<std::string> merges;   // BPE: "left right", highest priority first
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t sep_id = -1;               // WordPiece: [SEP], added after the text when add_sep
  bool add_bos = false;
  bool add_sep = false;
  bool add_eos = false;
  bool add_space_prefix = false;     // SPM: prefix text (and text after a special token) with a space
  // BPE: tokens spell bytes through GPT-2's byte-to-unicode map. False for BPE over raw UTF-8 pieces
  // (Gemma 4): spaces are written U+2581 as in SentencePiece and unknown bytes fall back to <0xHH>.
  bool byte_level = true;
  // WordPiece's BertNormalizer (tokenizer.ggml.normalizer.*).
  bool wpm_lowercase = true;
  bool wpm_strip_accents = true;
  // Unigram's normalizer: SentencePiece's precompiled character map (tokenizer.ggml.precompiled_charsmap:
  // a 4-byte size, a double array over byte prefixes, then NUL-terminated replacements; empty: none),
  // and whether runs of spaces collapse (tokenizer.ggml.remove_extra_whitespaces).
  std::vector<uint8_t> precompiled_charsmap;
  bool remove_extra_whitespaces = false;
  // Unigram as Hugging Face's tokenizers runs a tokenizer.json (tokenizer.ggml.loom.metaspace): spaces
  // collapse to one but a trailing one stays, the U+2581 prefix is added only where the text does not
  // already start with a space, and each word (from one U+2581 to the next) is segmented alone.
  // SentencePiece's own (llama.cpp's "t5") strips the ends and segments the whole text.
  bool metaspace = false;
  bool byte_fallback = false;  // unknown characters as <0xNN> byte tokens (tokenizers' Unigram option)
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// VocabData plus indexes. Immutable after construction, so safe to share across threads.
struct Vocab {
  explicit Vocab(VocabData data);  // validates; loom::Error on inconsistent data

  VocabData data;
  StringIdMap token_to_id;                  // text -> id (first id wins for duplicates)
  StringIdMap merge_rank;                   // "left right" -> rank
  std::vector<int32_t> byte_ids;            // 256 entries: id for raw byte b, or -1
  std::vector<int32_t> special_ids;         // control/user-defined/unknown, longest text first
  std::vector<int32_t> eog_ids;             // end-of-generation ids (eos, eot, eom, <end_of_turn>, ...)

  int32_t n_tokens() const { return static_cast<int32_t>(data.tokens.size()); }
  TokenType type(int32_t id) const { return data.types.empty() ? TokenType::normal : data.types[id]; }
  int32_t find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  // Rank of the merge "left right" or -1; `scratch` is reused across calls to avoid allocations.
  int32_t find_merge(std::string_view left, std::string_view right, std::string& scratch) const;
};

}  // namespace loom::tokenizer
