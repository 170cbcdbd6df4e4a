// WordPiece (BERT's tokenizer, tokenizer.ggml.model "bert"), the way llama.cpp's WPM tokenizer runs it:
//  1. normalise and split: optional NFD (first code point) and accent stripping, optional lowercasing;
//     whitespace ends a word, controls and NUL vanish, and each punctuation mark, ASCII symbol or CJK
//     ideograph is a word of its own;
//  2. each word, prefixed with U+2581 (the converter writes word-initial pieces that way and drops
//     "##" from continuation pieces), is cut greedily into the longest pieces in the vocabulary; a
//     word with any part that matches nothing becomes one unknown token.
#include <algorithm>
#include <string>

#include "tokenizer/merge_algorithms.h"
#include "tokenizer/unicode.h"

namespace loom::tokenizer {
namespace {

// The CJK blocks BERT splits per character (its _is_chinese_char, including llama.cpp's 0x2B920
// lower bound, which follows Hugging Face's Rust code).
bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::vector<std::string> split_words(std::string_view text, const VocabData& data) {
  std::vector<std::string> words(1);
  for (uint32_t cp : utf8_to_codepoints(text)) {
    if (data.wpm_strip_accents) cp = nfd_first(cp);
    const uint8_t flags = codepoint_flags(cp);
    if (flags & cp_whitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || (flags & cp_control)) continue;
    if (data.wpm_strip_accents && (flags & cp_mark)) continue;
    std::string utf8;
    append_utf8(utf8, data.wpm_lowercase ? to_lower(cp) : cp);
    if ((flags & cp_punctuation) || (cp < 0x7F && (flags & cp_symbol)) || is_cjk_ideograph(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(utf8);
      words.emplace_back();
    } else {
      words.back() += utf8;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wordpiece_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  size_t max_piece = 0;  // longest token text, bounding each search
  for (const std::string& token : vocab.data.tokens) max_piece = std::max(max_piece, token.size());
  for (const std::string& word : split_words(text, vocab.data)) {
    if (word.empty()) continue;
    const std::string marked = "\xE2\x96\x81" + word;
    const size_t n = marked.size(), first_piece = out.size();
    bool whole = true;
    for (size_t i = 0; i < n && whole;) {
      whole = false;
      for (size_t j = std::min(n, i + max_piece); j > i; --j) {
        const int32_t id = vocab.find(std::string_view(marked).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          i = j;
          whole = true;
          break;
        }
      }
    }
    if (!whole) out.resize(first_piece);  // a part that matches nothing: the word is unknown
    if (out.size() == first_piece) out.push_back(vocab.data.unk_id);
  }
}

}  // namespace loom::tokenizer
