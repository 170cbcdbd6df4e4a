// StreamingDecoder — turns generated ids into printable text one id at a time. A character can be split
// across byte tokens (<0xE2><0x96><0x81>); pieces are held back until they form complete UTF-8, and
// bytes that can never become valid UTF-8 are replaced by U+FFFD, so every returned string is valid.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

class Tokenizer;

class StreamingDecoder {
 public:
  // The tokenizer must outlive the decoder. render_special: print control tokens' text.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool render_special = false);

  std::string push(int32_t id);  // text that became complete with this id (often empty)
  std::string flush();           // what is still held, an unfinished character as U+FFFD; resets

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  bool strip_space_;  // SentencePiece: drop the space encode() put in front of the text
  std::string pending_;
};

// Moves the longest valid UTF-8 prefix of `pending` into the result; invalid bytes become U+FFFD.
// With `final`, an unfinished sequence at the end becomes U+FFFD too, otherwise it stays in `pending`.
std::string take_valid_utf8(std::string& pending, bool final);

}  // namespace loom
