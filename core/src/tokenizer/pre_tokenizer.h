// Pre-tokenizers for byte-level BPE: split text into words before merging. Each is a hand-written
// scanner equivalent to the regex its model was trained with (std::regex has no \p{L}); they follow
// llama.cpp's scanners so that ids match it exactly.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

enum class PreTokenizerKind {
  gpt2,       // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,     // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,      // llama3 with \p{N} (digits one by one)
  starcoder,  // \p{N} first, then gpt2 on what is left
};

// Maps tokenizer.ggml.pre to a scanner; loom::Error naming the value when Loom has none for it.
PreTokenizerKind pre_tokenizer_from_name(std::string_view pre);

// The words of `text`, in order, re-encoded from code points (invalid UTF-8 bytes become U+FFFD).
std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace loom::tokenizer
