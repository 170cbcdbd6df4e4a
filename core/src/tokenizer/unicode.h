// Unicode helpers for the tokenizers: UTF-8 coding the way llama.cpp does it, character classes for the
// pre-tokenizer scanners, and GPT-2's byte <-> printable-codepoint mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

struct CodepointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

struct CodepointPair {
  uint32_t from;
  uint32_t to;
};

namespace tables {
// Sorted, disjoint ranges; generated into unicode_tables.cpp by gen_unicode_tables.py.
extern const CodepointRange letter_ranges[];
extern const size_t n_letter_ranges;
extern const CodepointRange number_ranges[];
extern const size_t n_number_ranges;
extern const CodepointRange whitespace_ranges[];
extern const size_t n_whitespace_ranges;
extern const CodepointRange punctuation_ranges[];
extern const size_t n_punctuation_ranges;
extern const CodepointRange symbol_ranges[];
extern const size_t n_symbol_ranges;
extern const CodepointRange mark_ranges[];
extern const size_t n_mark_ranges;
extern const CodepointRange control_ranges[];
extern const size_t n_control_ranges;
// Sorted by `from`.
extern const CodepointPair lowercase_pairs[];
extern const size_t n_lowercase_pairs;
extern const CodepointPair nfd_first_pairs[];
extern const size_t n_nfd_first_pairs;
}  // namespace tables

enum CodepointFlag : uint8_t {
  cp_letter = 1,      // \p{L}
  cp_number = 2,      // \p{N}
  cp_whitespace = 4,  // \s
  cp_punctuation = 8, // \p{P}
  cp_symbol = 16,     // \p{S}
  cp_mark = 32,       // \p{M} (accents)
  cp_control = 64,    // \p{C} without unassigned code points, as llama.cpp classifies them
};

// Bitmask of CodepointFlag for one code point (0 for everything else, e.g. unassigned ones).
uint8_t codepoint_flags(uint32_t cp);

// Unicode's simple lowercase mapping (cp itself when it has none).
uint32_t to_lower(uint32_t cp);
// The first code point of cp's canonical decomposition (cp when it has none): llama.cpp's NFD for
// WordPiece, after which the accents are dropped anyway.
uint32_t nfd_first(uint32_t cp);

// Length of the UTF-8 sequence a lead byte announces; 1 for ASCII and stray continuation bytes.
inline size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lengths[lead >> 4];
}

// Decodes UTF-8; each invalid byte becomes U+FFFD (as llama.cpp does, so ids match it).
std::vector<uint32_t> utf8_to_codepoints(std::string_view text);
void append_utf8(std::string& out, uint32_t cp);

// Length of the longest prefix of `bytes` that is complete, valid UTF-8 (stops before a sequence that
// is cut off at the end); `is_valid_utf8` says whether the whole string is.
size_t utf8_complete_prefix(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

// GPT-2 byte-level BPE stores every byte as a printable code point (space -> U+0120 'Ġ', ...).
const std::string& byte_to_unicode(uint8_t byte);  // UTF-8 of the code point
int unicode_to_byte(uint32_t cp);                  // -1 when cp is not in the mapping

}  // namespace loom::tokenizer
