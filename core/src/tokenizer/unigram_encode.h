// Unigram tokenization (SentencePiece's unigram language model: T5, XLM-RoBERTa, multilingual E5 and
// BGE-M3; llama.cpp's "t5" vocabulary). The text is normalized through the model's precompiled
// character map (NFKC-like replacements of the longest matching byte prefix), spaces become U+2581,
// and the segmentation into pieces of the highest total score wins (Viterbi over a trie of the
// pieces; a character no piece covers is the unknown token, scored 10 below the worst piece).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace loom::tokenizer {

class UnigramModel {
 public:
  // loom::Error for a malformed character map.
  explicit UnigramModel(const Vocab& vocab);

  // One fragment of text without special tokens (they are split off before), appended to out.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  // A byte trie: node 0 is the root; value[node] is the token ending there, or -1.
  struct Trie {
    std::unordered_map<uint64_t, int32_t> child;  // (node << 8) | byte -> node
    std::vector<int32_t> value{-1};
    void insert(std::string_view text, int32_t id);
    int32_t next(int32_t node, uint8_t byte) const {
      const auto it = child.find((uint64_t(uint32_t(node)) << 8) | byte);
      return it == child.end() ? -1 : it->second;
    }
  };

  std::string normalize(std::string_view text) const;
  // The normalized form of the longest prefix of text at offset: bytes consumed and their replacement.
  std::string_view normalize_prefix(std::string_view text, size_t offset, size_t& consumed) const;
  void segment(std::string_view normalized, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  std::vector<uint32_t> double_array_;  // the character map's trie (XOR-compressed double array)
  std::string_view replacements_;       // its NUL-terminated replacement strings
  Trie pieces_, user_defined_;
  double unknown_score_ = 0.0;
};

}  // namespace loom::tokenizer
