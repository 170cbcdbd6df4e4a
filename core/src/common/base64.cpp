#include "common/base64.h"

#include <array>

#include "common/error.h"

namespace loom {

namespace {

// Standard and URL-safe alphabets both; -1 for anything else.
constexpr std::array<int8_t, 256> kBase64 = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
  t['-'] = 62;
  t['_'] = 63;
  return t;
}();

}  // namespace

std::vector<uint8_t> decode_base64(std::string_view text, const std::string& what) {
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int n_bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c == '=') {
      ++padding;
      continue;
    }
    if (c == '\r' || c == '\n' || c == ' ') continue;
    const int value = kBase64[c];
    if (value < 0 || padding > 0) throw Error(what + " has a character outside base64 at position " + std::to_string(i));
    bits = (bits << 6) | uint32_t(value);
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(static_cast<uint8_t>(bits >> n_bits));
    }
  }
  if (padding > 2 || n_bits >= 6) throw Error(what + "'s base64 ends mid-character (truncated?)");
  return out;
}

}  // namespace loom
