#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace loom::tokenizer {
namespace {

bool in_ranges(const CodepointRange* ranges, size_t n_ranges, uint32_t cp) {
  const CodepointRange* end = ranges + n_ranges;
  const CodepointRange* it =
      std::upper_bound(ranges, end, cp, [](uint32_t value, const CodepointRange& r) { return value < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

uint8_t compute_flags(uint32_t cp) {
  uint8_t flags = 0;
  if (in_ranges(tables::letter_ranges, tables::n_letter_ranges, cp)) flags |= cp_letter;
  if (in_ranges(tables::number_ranges, tables::n_number_ranges, cp)) flags |= cp_number;
  if (in_ranges(tables::whitespace_ranges, tables::n_whitespace_ranges, cp)) flags |= cp_whitespace;
  if (in_ranges(tables::punctuation_ranges, tables::n_punctuation_ranges, cp)) flags |= cp_punctuation;
  if (in_ranges(tables::symbol_ranges, tables::n_symbol_ranges, cp)) flags |= cp_symbol;
  if (in_ranges(tables::mark_ranges, tables::n_mark_ranges, cp)) flags |= cp_mark;
  if (in_ranges(tables::control_ranges, tables::n_control_ranges, cp)) flags |= cp_control;
  return flags;
}

// The Basic Multilingual Plane covers almost all text; a 64 KiB table makes its lookups O(1).
struct BmpFlags {
  std::array<uint8_t, 0x10000> flags{};
  BmpFlags() {
    for (uint32_t cp = 0; cp < 0x10000; ++cp) flags[cp] = compute_flags(cp);
  }
};

struct ByteMapping {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 0x200> cp_to_byte{};  // every mapped code point is below 0x144
  ByteMapping() {
    cp_to_byte.fill(-1);
    int n_extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n_extra++);
      append_utf8(byte_to_utf8[b], cp);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMapping& byte_mapping() {
  static const ByteMapping mapping;
  return mapping;
}

// Decodes one code point at `offset`; returns false (and consumes nothing) on invalid UTF-8.
bool decode_one(std::string_view s, size_t& offset, uint32_t& cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[offset + i]); };
  const auto is_cont = [&](size_t i) { return offset + i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const uint8_t b0 = byte(0);
  if (!(b0 & 0x80)) {
    cp = b0;
    offset += 1;
    return true;
  }
  if (!(b0 & 0x40)) return false;
  if (!(b0 & 0x20)) {
    if (!is_cont(1)) return false;
    cp = ((b0 & 0x1Fu) << 6) | (byte(1) & 0x3Fu);
    offset += 2;
    return true;
  }
  if (!(b0 & 0x10)) {
    if (!is_cont(1) || !is_cont(2)) return false;
    cp = ((b0 & 0x0Fu) << 12) | ((byte(1) & 0x3Fu) << 6) | (byte(2) & 0x3Fu);
    offset += 3;
    return true;
  }
  if (!(b0 & 0x08)) {
    if (!is_cont(1) || !is_cont(2) || !is_cont(3)) return false;
    cp = ((b0 & 0x07u) << 18) | ((byte(1) & 0x3Fu) << 12) | ((byte(2) & 0x3Fu) << 6) | (byte(3) & 0x3Fu);
    offset += 4;
    return true;
  }
  return false;
}

}  // namespace

uint8_t codepoint_flags(uint32_t cp) {
  static const BmpFlags bmp;
  if (cp < 0x10000) return bmp.flags[cp];
  return compute_flags(cp);
}

namespace {

uint32_t lookup_pair(const CodepointPair* pairs, size_t n, uint32_t cp) {
  const CodepointPair* end = pairs + n;
  const CodepointPair* it = std::lower_bound(pairs, end, cp, [](const CodepointPair& p, uint32_t value) { return p.from < value; });
  return it != end && it->from == cp ? it->to : cp;
}

}  // namespace

uint32_t to_lower(uint32_t cp) { return lookup_pair(tables::lowercase_pairs, tables::n_lowercase_pairs, cp); }

uint32_t nfd_first(uint32_t cp) {
  // Hangul syllables decompose algorithmically: the first part is the leading consonant.
  constexpr uint32_t kSyllableBase = 0xAC00, kSyllables = 11172, kPerLeading = 588, kLeadingBase = 0x1100;
  if (cp >= kSyllableBase && cp < kSyllableBase + kSyllables) return kLeadingBase + (cp - kSyllableBase) / kPerLeading;
  return lookup_pair(tables::nfd_first_pairs, tables::n_nfd_first_pairs, cp);
}

std::vector<uint32_t> utf8_to_codepoints(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t cp = 0;
    if (decode_one(text, offset, cp)) {
      cps.push_back(cp);
    } else {
      cps.push_back(0xFFFD);
      ++offset;
    }
  }
  return cps;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_complete_prefix(std::string_view bytes) {
  // Only the last (up to 3) bytes can belong to an unfinished sequence.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto b = static_cast<uint8_t>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t need = (b & 0x80) == 0 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

bool is_valid_utf8(std::string_view bytes) {
  size_t offset = 0;
  uint32_t cp = 0;
  while (offset < bytes.size()) {
    if (!decode_one(bytes, offset, cp)) return false;
  }
  return true;
}

const std::string& byte_to_unicode(uint8_t byte) { return byte_mapping().byte_to_utf8[byte]; }

int unicode_to_byte(uint32_t cp) {
  if (cp >= byte_mapping().cp_to_byte.size()) return -1;
  return byte_mapping().cp_to_byte[cp];
}

}  // namespace loom::tokenizer
