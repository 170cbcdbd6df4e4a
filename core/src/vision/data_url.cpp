#include "vision/data_url.h"

#include <array>

#include "common/error.h"

namespace loom::vision {

namespace {

// Standard and URL-safe alphabets both (clients send either); -1 for anything else.
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

DataUrl parse_data_url(std::string_view url, uint64_t max_bytes) {
  if (url.substr(0, 5) != "data:") {
    throw Error("only data: URLs are accepted (base64 image bytes inline); Loom fetches nothing over the network");
  }
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) throw Error("data: URL has no ',' before its data");
  const std::string_view header = url.substr(5, comma - 5);
  const size_t marker = header.rfind(";base64");
  if (marker == std::string_view::npos || marker + 7 != header.size()) {
    throw Error("data: URL must be base64 (data:<media type>;base64,...)");
  }
  DataUrl out;
  out.media_type = std::string(header.substr(0, header.find(';')));
  const std::string_view data = url.substr(comma + 1);
  if (uint64_t(data.size()) / 4 * 3 > max_bytes + 3) {
    throw Error("image of about " + std::to_string(uint64_t(data.size()) / 4 * 3) + " bytes is over the limit of " +
                std::to_string(max_bytes));
  }
  out.bytes.reserve(data.size() / 4 * 3);
  uint32_t bits = 0;
  int n_bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    const auto c = static_cast<uint8_t>(data[i]);
    if (c == '=') {
      ++padding;
      continue;
    }
    if (c == '\r' || c == '\n' || c == ' ') continue;
    const int value = kBase64[c];
    if (value < 0 || padding > 0) {
      throw Error("data: URL has a character outside base64 at position " + std::to_string(i) + " of its data");
    }
    bits = (bits << 6) | uint32_t(value);
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.bytes.push_back(static_cast<uint8_t>(bits >> n_bits));
    }
  }
  if (padding > 2 || n_bits >= 6) throw Error("data: URL's base64 ends mid-character (truncated?)");
  if (out.bytes.size() > max_bytes) {
    throw Error("image of " + std::to_string(out.bytes.size()) + " bytes is over the limit of " + std::to_string(max_bytes));
  }
  return out;
}

}  // namespace loom::vision
