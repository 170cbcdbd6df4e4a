#include "tokenizer/streaming_decoder.h"

#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";

enum class Utf8Status { complete, incomplete, invalid };

// Checks one sequence at the start of `s` (not empty); `len` is its length when complete.
// Rejects overlong forms, surrogates and code points above U+10FFFF, so the output is strictly valid.
Utf8Status check_sequence(std::string_view s, size_t& len) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) {
    len = 1;
    return Utf8Status::complete;
  }
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return Utf8Status::invalid;
  }
  for (size_t i = 1; i < len; ++i) {
    if (i >= s.size()) return Utf8Status::incomplete;
    const auto b = static_cast<uint8_t>(s[i]);
    if (i == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return Utf8Status::invalid;
  }
  return Utf8Status::complete;
}

}  // namespace

std::string take_valid_utf8(std::string& pending, bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    size_t len = 0;
    const Utf8Status status = check_sequence(std::string_view(pending).substr(pos), len);
    if (status == Utf8Status::complete) {
      out.append(pending, pos, len);
      pos += len;
    } else if (status == Utf8Status::invalid) {
      out += replacement;
      ++pos;
    } else {
      if (final) {
        out += replacement;
        pos = pending.size();
      }
      break;
    }
  }
  pending.erase(0, pos);
  return out;
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer),
      render_special_(render_special),
      strip_space_(tokenizer.kind() == tokenizer::VocabKind::spm && tokenizer.add_space_prefix()) {}

std::string StreamingDecoder::push(int32_t id) {
  std::string piece = tokenizer_.token_to_piece(id, render_special_);
  if (piece.empty()) return {};
  if (strip_space_ && piece[0] == ' ') piece.erase(0, 1);
  strip_space_ = false;
  pending_ += piece;
  return take_valid_utf8(pending_, false);
}

std::string StreamingDecoder::flush() {
  std::string out = take_valid_utf8(pending_, true);
  strip_space_ = tokenizer_.kind() == tokenizer::VocabKind::spm && tokenizer_.add_space_prefix();
  return out;
}

}  // namespace loom
