// The synthetic SentencePiece vocabulary. Every multi-character piece is added after all of its
// prefixes, so a bigram-merging SPM tokenizer can reach it from single characters.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "gguf/synth_model.h"

namespace loom::gguf {

namespace {

constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word-start marker
constexpr int kMinVocab = 300;
// llama.cpp's llama_token_type values.
constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeByte = 6;

const char* const kWords[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "was", "on", "with", "as", "he", "be",
    "at", "by", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you",
    "were", "her", "all", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who", "will",
    "more", "no", "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them", "can",
    "only", "other", "new", "some", "could", "time", "these", "two", "may", "then", "do", "first", "any",
    "my", "now", "such", "like", "our", "over", "man", "me", "even", "most", "made", "after", "also", "did",
    "many", "before", "must", "through", "back", "years", "where", "much", "your", "way", "well", "down",
    "Hello", "world", "The", "loom", "model", "token", "text", "story", "once", "upon", "day", "little"};

class VocabBuilder {
 public:
  void add(const std::string& text, float score, int32_t type) {
    if (!seen_.insert(text).second) return;
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(type);
  }
  // Adds the piece after its prefixes (split at UTF-8 character boundaries).
  void add_piece(const std::string& piece) {
    for (size_t end = 1; end <= piece.size(); ++end) {
      if (end < piece.size() && (static_cast<unsigned char>(piece[end]) & 0xc0) == 0x80) continue;
      if (tokens.size() >= limit) return;
      add(piece.substr(0, end), -static_cast<float>(tokens.size()), kTypeNormal);
    }
  }
  size_t limit = 0;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;

 private:
  std::set<std::string> seen_;
};

}  // namespace

void add_synthetic_vocab(GgufWriter& writer, int n_vocab, bool image_markers, const std::vector<std::string>& control_tokens) {
  if (n_vocab < kMinVocab) {
    throw Error("synthetic vocabulary: n_vocab " + std::to_string(n_vocab) + " is too small (at least " +
                std::to_string(kMinVocab) + ": 3 specials, 256 byte tokens and some pieces)");
  }
  VocabBuilder vocab;
  // Gemma 3's image markers and the extra control tokens take the last ids, so the other tokens keep theirs.
  const size_t n_markers = (image_markers ? 2 : 0) + control_tokens.size();
  vocab.limit = static_cast<size_t>(n_vocab) - n_markers;
  vocab.add("<unk>", 0.0f, kTypeUnknown);
  vocab.add("<s>", 0.0f, kTypeControl);
  vocab.add("</s>", 0.0f, kTypeControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab.add(buf, 0.0f, kTypeByte);
  }
  vocab.add_piece(kSpace);
  for (char c = 'a'; c <= 'z'; ++c) vocab.add_piece(std::string(1, c));
  for (const char* word : kWords) vocab.add_piece(std::string(kSpace) + word);
  for (char c = 'A'; c <= 'Z'; ++c) vocab.add_piece(std::string(1, c));
  for (const char* punct : {".", ",", "!", "?", "'", "-", ":", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}) {
    vocab.add_piece(punct);
  }
  // Pad with two- and three-letter word starts until the requested size.
  for (char a = 'a'; a <= 'z' && vocab.tokens.size() < vocab.limit; ++a) {
    for (char b = 'a'; b <= 'z' && vocab.tokens.size() < vocab.limit; ++b) {
      vocab.add_piece(std::string(kSpace) + a + b);
    }
  }
  for (char a = 'a'; a <= 'z' && vocab.tokens.size() < vocab.limit; ++a) {
    for (char b = 'a'; b <= 'z' && vocab.tokens.size() < vocab.limit; ++b) {
      for (char c = 'a'; c <= 'z' && vocab.tokens.size() < vocab.limit; ++c) {
        vocab.add_piece(std::string(kSpace) + a + b + c);
      }
    }
  }
  if (n_markers > 0 && vocab.tokens.size() == vocab.limit) {
    vocab.limit += n_markers;
    if (image_markers) {
      vocab.add("<start_of_image>", 0.0f, kTypeControl);
      vocab.add("<end_of_image>", 0.0f, kTypeControl);
    }
    for (const std::string& token : control_tokens) vocab.add(token, 0.0f, kTypeControl);
  }
  if (vocab.tokens.size() != vocab.limit) {
    throw Error("synthetic vocabulary: n_vocab " + std::to_string(n_vocab) + " is larger than the " +
                std::to_string(vocab.tokens.size()) + " pieces the generator can make");
  }
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string("tokenizer.ggml.pre", "default");
  writer.set_string_array("tokenizer.ggml.tokens", std::move(vocab.tokens));
  writer.set_float32_array("tokenizer.ggml.scores", std::move(vocab.scores));
  writer.set_int32_array("tokenizer.ggml.token_type", std::move(vocab.types));
  writer.set_uint32("tokenizer.ggml.unknown_token_id", 0);
  writer.set_uint32("tokenizer.ggml.bos_token_id", 1);
  writer.set_uint32("tokenizer.ggml.eos_token_id", 2);
  writer.set_bool("tokenizer.ggml.add_bos_token", true);
  writer.set_bool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace loom::gguf
