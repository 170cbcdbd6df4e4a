// Pre-tokenizers for byte-level BPE: split text into words before merging. The common ones are
// hand-written scanners equivalent to their models' regexes (fast, and following llama.cpp's so that
// ids match exactly); every other `tokenizer.ggml.pre` llama.cpp knows runs its split regexes through
// PCRE2 (regex_split.h, pre_tokenizer_table.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

enum class PreTokenizerKind {
  gpt2,       // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,     // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,      // llama3 with \p{N} (digits one by one)
  starcoder,  // \p{N} first, then gpt2 on what is left
  regex,      // the split regexes of pre_tokenizer_table.h, through PCRE2
};

// The words of `text`, in order, re-encoded from code points (invalid UTF-8 bytes become U+FFFD).
std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text);

class RegexSplitter;

// The pre-tokenizer a vocabulary names: a scanner, or the regexes of the table.
class PreTokenizer {
 public:
  // loom::Error naming the value (and how many names Loom knows) when it has none for it.
  static PreTokenizer for_name(std::string_view pre);

  std::vector<std::string> split(std::string_view text) const;
  // Whole words found in the vocabulary skip the merges (tokenizer.json's ignore_merges).
  bool ignore_merges() const { return ignore_merges_; }

 private:
  PreTokenizerKind kind_ = PreTokenizerKind::gpt2;
  bool ignore_merges_ = false;
  std::shared_ptr<const RegexSplitter> regexes_;  // set when no scanner handles the name
};

// Every tokenizer.ggml.pre value for_name() accepts.
std::vector<std::string> known_pre_tokenizers();

}  // namespace loom::tokenizer
