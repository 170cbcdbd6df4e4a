#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/error.h"
#include "tokenizer/pre_tokenizer_table.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/unicode.h"

namespace loom::tokenizer {
namespace {

constexpr uint32_t out_of_range = 0xFFFFFFFF;

// Code points of one chunk with their class flags. Positions outside [begin, end) read as
// "out of range" (no flags), which is how lookahead stops at chunk boundaries.
struct Chunk {
  const std::vector<uint32_t>& cps;
  const std::vector<uint8_t>& flags;
  size_t begin;
  size_t end;

  uint32_t cpt(size_t pos) const { return pos >= begin && pos < end ? cps[pos] : out_of_range; }
  bool in(size_t pos) const { return pos >= begin && pos < end; }
  bool letter(size_t pos) const { return in(pos) && (flags[pos] & cp_letter); }
  bool number(size_t pos) const { return in(pos) && (flags[pos] & cp_number); }
  bool space(size_t pos) const { return in(pos) && (flags[pos] & cp_whitespace); }
  // [^\s\p{L}\p{N}]: any code point inside the chunk outside the three classes.
  bool other(size_t pos) const { return in(pos) && !(flags[pos] & (cp_letter | cp_number | cp_whitespace)); }
};

// Appends word lengths (in code points) to `lengths`.
class Splitter {
 public:
  Splitter(const Chunk& chunk, std::vector<size_t>& lengths) : c_(chunk), lengths_(lengths), prev_end_(chunk.begin) {}

  size_t add(size_t end) {
    const size_t len = end - prev_end_;
    if (len > 0) lengths_.push_back(len);
    prev_end_ = end;
    return len;
  }

 protected:
  const Chunk& c_;

 private:
  std::vector<size_t>& lengths_;
  size_t prev_end_;
};

uint32_t ascii_lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive; returns the match length or 0.
size_t match_contraction(const Chunk& c, size_t pos, bool ignore_case) {
  if (c.cpt(pos) != '\'' || !c.in(pos + 1)) return 0;
  const auto fold = [&](uint32_t cp) { return ignore_case ? ascii_lower(cp) : cp; };
  const uint32_t next = fold(c.cpt(pos + 1));
  if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
  if (!c.in(pos + 2)) return 0;
  const uint32_t next2 = fold(c.cpt(pos + 2));
  if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') || (next == 'l' && next2 == 'l')) return 3;
  return 0;
}

void split_gpt2(const Chunk& c, std::vector<size_t>& lengths) {
  Splitter out(c, lengths);
  for (size_t pos = c.begin; pos < c.end;) {
    const uint32_t cpt = c.cpt(pos);
    if (size_t n = match_contraction(c, pos, false)) {
      pos += out.add(pos + n);
      continue;
    }
    // A leading space joins the following letters, digits or symbols.
    const size_t probe = cpt == ' ' ? pos + 1 : pos;
    if (c.letter(probe)) {
      pos = probe;
      while (c.letter(pos)) ++pos;
      out.add(pos);
      continue;
    }
    if (c.number(probe)) {
      pos = probe;
      while (c.number(pos)) ++pos;
      out.add(pos);
      continue;
    }
    if (c.other(probe)) {
      pos = probe;
      while (c.other(pos)) ++pos;
      out.add(pos);
      continue;
    }
    size_t n_spaces = 0;
    while (c.space(pos + n_spaces)) ++n_spaces;
    // \s+(?!\S): leave the last whitespace to prefix the next word.
    if (n_spaces > 1 && c.cpt(pos + n_spaces) != out_of_range) {
      pos += n_spaces - 1;
      out.add(pos);
      continue;
    }
    if (n_spaces > 0) {
      pos += n_spaces;
      out.add(pos);
      continue;
    }
    out.add(++pos);
  }
}

void split_llama3(const Chunk& c, std::vector<size_t>& lengths, size_t max_digits) {
  Splitter out(c, lengths);
  for (size_t pos = c.begin; pos < c.end;) {
    const uint32_t cpt = c.cpt(pos);
    if (size_t n = match_contraction(c, pos, true)) {
      pos += out.add(pos + n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(cpt == '\r' || cpt == '\n' || c.number(pos)) && (c.letter(pos) || c.letter(pos + 1))) {
      ++pos;
      while (c.letter(pos)) ++pos;
      out.add(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (c.number(pos)) {
      size_t start = pos;
      while (c.number(pos)) {
        if (++pos - start >= max_digits) {
          out.add(pos);
          start = pos;
        }
      }
      out.add(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t probe = cpt == ' ' ? pos + 1 : pos;
    if (c.other(probe)) {
      pos = probe;
      while (c.other(pos)) ++pos;
      while (c.cpt(pos) == '\r' || c.cpt(pos) == '\n') ++pos;
      out.add(pos);
      continue;
    }
    size_t n_spaces = 0;
    size_t last_newline_end = 0;
    while (c.space(pos + n_spaces)) {
      const uint32_t cp2 = c.cpt(pos + n_spaces);
      if (cp2 == '\r' || cp2 == '\n') last_newline_end = pos + n_spaces + 1;
      ++n_spaces;
    }
    if (last_newline_end > 0) {  // \s*[\r\n]+
      pos = last_newline_end;
      out.add(pos);
      continue;
    }
    if (n_spaces > 1 && c.cpt(pos + n_spaces) != out_of_range) {  // \s+(?!\S)
      pos += n_spaces - 1;
      out.add(pos);
      continue;
    }
    if (n_spaces > 0) {
      pos += n_spaces;
      out.add(pos);
      continue;
    }
    out.add(++pos);
  }
}

// \p{N} as a first pass: every digit becomes its own chunk, the runs between them stay whole.
std::vector<size_t> split_each_number(const std::vector<uint8_t>& flags) {
  std::vector<size_t> lengths;
  size_t run = 0;
  for (uint8_t f : flags) {
    if (f & cp_number) {
      if (run > 0) lengths.push_back(run);
      run = 0;
      lengths.push_back(1);
    } else {
      ++run;
    }
  }
  if (run > 0) lengths.push_back(run);
  return lengths;
}

// The names the hand-written scanners serve (they pass llama.cpp's suites for these vocabularies).
struct ScannerName {
  std::string_view name;
  PreTokenizerKind kind;
};
constexpr std::array<ScannerName, 20> kScannerNames{{
    {"default", PreTokenizerKind::gpt2},       {"gpt-2", PreTokenizerKind::gpt2},
    {"gpt2", PreTokenizerKind::gpt2},          {"phi-2", PreTokenizerKind::gpt2},
    {"mpt", PreTokenizerKind::gpt2},           {"olmo", PreTokenizerKind::gpt2},
    {"jais", PreTokenizerKind::gpt2},          {"llama3", PreTokenizerKind::llama3},
    {"llama-bpe", PreTokenizerKind::llama3},   {"llama-v3", PreTokenizerKind::llama3},
    {"falcon3", PreTokenizerKind::llama3},     {"pixtral", PreTokenizerKind::llama3},
    {"qwen2", PreTokenizerKind::qwen2},        {"deepseek-r1-qwen", PreTokenizerKind::qwen2},
    {"starcoder", PreTokenizerKind::starcoder}, {"refact", PreTokenizerKind::starcoder},
    {"command-r", PreTokenizerKind::starcoder}, {"smollm", PreTokenizerKind::starcoder},
    {"codeshell", PreTokenizerKind::starcoder}, {"exaone", PreTokenizerKind::starcoder},
}};

}  // namespace

PreTokenizer PreTokenizer::for_name(std::string_view pre) {
  PreTokenizer p;
  for (const auto& entry : kScannerNames) {
    if (entry.name == pre) {
      p.kind_ = entry.kind;
      // Llama 3's tokenizer.json sets ignore_merges: whole words in the vocabulary win over merging.
      p.ignore_merges_ = entry.kind == PreTokenizerKind::llama3;
      return p;
    }
  }
  for (const auto& entry : named_pre_tokenizers()) {
    if (entry.name != pre) continue;
    // Compiled once per pattern set and shared by every tokenizer that names it.
    static std::mutex mutex;
    static std::map<size_t, std::shared_ptr<const RegexSplitter>> compiled;
    std::lock_guard lock(mutex);
    auto& splitter = compiled[entry.pattern_set];
    if (!splitter) splitter = std::make_shared<RegexSplitter>(pre_tokenizer_pattern_sets()[entry.pattern_set].patterns);
    p.kind_ = PreTokenizerKind::regex;
    p.ignore_merges_ = entry.ignore_merges;
    p.regexes_ = splitter;
    return p;
  }
  std::string known;
  for (const std::string& name : known_pre_tokenizers()) known += (known.empty() ? "" : ", ") + name;
  throw Error("tokenizer.ggml.pre = '" + std::string(pre) + "' names a pre-tokenizer Loom does not know (it knows: " +
              known + ")");
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  if (kind_ != PreTokenizerKind::regex) return pre_tokenize(kind_, text);
  // The scanners replace invalid UTF-8 by U+FFFD; so does this path, which PCRE2 needs valid anyway.
  std::string valid;
  for (uint32_t cp : utf8_to_codepoints(text)) append_utf8(valid, cp);
  return regexes_->split(valid);
}

std::vector<std::string> known_pre_tokenizers() {
  std::vector<std::string> names;
  for (const auto& entry : kScannerNames) names.emplace_back(entry.name);
  for (const auto& entry : named_pre_tokenizers()) {
    if (std::find(names.begin(), names.end(), entry.name) == names.end()) names.emplace_back(entry.name);
  }
  return names;
}

std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text) {
  const std::vector<uint32_t> cps = utf8_to_codepoints(text);
  std::vector<uint8_t> flags(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) flags[i] = codepoint_flags(cps[i]);

  std::vector<size_t> chunks =
      kind == PreTokenizerKind::starcoder ? split_each_number(flags) : std::vector<size_t>{cps.size()};
  std::vector<size_t> lengths;
  size_t begin = 0;
  for (size_t chunk_len : chunks) {
    const Chunk chunk{cps, flags, begin, begin + chunk_len};
    switch (kind) {
      case PreTokenizerKind::gpt2:
      case PreTokenizerKind::starcoder: split_gpt2(chunk, lengths); break;
      case PreTokenizerKind::llama3: split_llama3(chunk, lengths, 3); break;
      case PreTokenizerKind::qwen2: split_llama3(chunk, lengths, 1); break;
      case PreTokenizerKind::regex: throw Error("pre_tokenize: the regex pre-tokenizer needs its PreTokenizer");
    }
    begin += chunk_len;
  }

  std::vector<std::string> words;
  words.reserve(lengths.size());
  size_t pos = 0;
  for (size_t len : lengths) {
    std::string word;
    for (size_t i = 0; i < len; ++i) append_utf8(word, cps[pos + i]);
    words.push_back(std::move(word));
    pos += len;
  }
  return words;
}

}  // namespace loom::tokenizer
