#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_split.h"

#include <pcre2.h>

#include "common/error.h"

namespace loom::tokenizer {

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  ~Compiled() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

RegexSplitter::RegexSplitter(const std::vector<std::string_view>& patterns) {
  for (std::string_view pattern : patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto compiled = std::make_unique<Compiled>();
    // UCP: \s, \d, \w and POSIX classes follow Unicode properties, as the tokenizers' regex engines do.
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      throw Error("pre-tokenizer pattern '" + std::string(pattern) + "' does not compile at offset " +
                  std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter works too
    compiled->match = pcre2_match_data_create_from_pattern(compiled->code, nullptr);
    regexes_.push_back(std::move(compiled));
  }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string> RegexSplitter::split(std::string_view text) const {
  // Pieces as [begin, end) offsets into `text`; every regex refines the current list.
  std::vector<std::pair<size_t, size_t>> pieces = {{0, text.size()}};
  if (text.empty()) return {};
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (const auto& regex : regexes_) {
    std::vector<std::pair<size_t, size_t>> next;
    for (const auto& [begin, end] : pieces) {
      size_t at = begin, kept = begin;
      while (at < end) {
        // Each piece is matched on its own, as if it were the whole text (anchors and look-around
        // stop at its edges), so the subject is the piece, not the full text.
        const int rc = pcre2_match(regex->code, subject + begin, end - begin, at - begin, PCRE2_NO_UTF_CHECK,
                                   regex->match, nullptr);
        if (rc < 0) break;  // no further match (or a matching limit): the rest stays as it is
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(regex->match);
        const size_t match_begin = begin + ovector[0], match_end = begin + ovector[1];
        if (match_end == match_begin) {
          // An empty match isolates nothing; step over one character and look again.
          at = match_end + 1;
          while (at < end && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
          continue;
        }
        if (match_begin > kept) next.emplace_back(kept, match_begin);
        next.emplace_back(match_begin, match_end);
        kept = at = match_end;
      }
      if (kept < end) next.emplace_back(kept, end);
    }
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) words.emplace_back(text.substr(begin, end - begin));
  return words;
}

}  // namespace loom::tokenizer
