#include "hf/pre_tokenizer_match.h"

#include <algorithm>
#include <string_view>

#include "common/error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/pre_tokenizer_table.h"
#include "tokenizer/regex_split.h"

namespace loom::hf {

using nlohmann::json;

namespace {

// GPT-2's split regex, which ByteLevel applies when use_regex is true (tokenizers' default).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What the published patterns differ on: contraction case, digit run lengths (1, 3, 4+), letters
// with combining marks, CJK and Hangul, scripts mixed with digits, \r\n and newline runs, space runs
// before words and at the end, tabs, punctuation runs before newlines, slashes, emoji, thousands.
constexpr std::string_view kProbe =
    "Hello WORLD! I'm you'RE they'Ll it'S we'VE DON'T\n\n  leading  spaces\ttab\r\n"
    "1 22 333 4444 55555 1,234,567.89 3.14 x2 a1b2 ５６\n"
    "caf\xc3\xa9 cafe\xcc\x81 na\xc3\xafve \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82\xe0\xa4\xa6\xe0\xa5\x80 "
    "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf "
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82\n"
    "def f(x):\n    return x**2 // 3 != {'a': [1, 2]}...!!!\n\n\n"
    "path/to/file.txt <tag>&amp; $100 #hash @user ~~ ||| \xf0\x9f\x98\x80\xf0\x9f\x9a\x80 CamelCaseWord ALLCAPS lower "
    "   \n \n\t\n   end   ";

// Names to prefer when several name the same pieces: the ones the models themselves are known by in
// llama.cpp's converter. Only llama.cpp's own names are candidates (Loom's aliases such as "gpt2" would
// make a file llama.cpp refuses), and never "default": llama.cpp gives it patterns of its own.
constexpr std::string_view kPreferred[] = {"gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder", "smollm", "deepseek-llm", "deepseek-v3", "gpt-4o", "tekken"};

std::string pattern_of(const json& pattern, const std::string& file) {
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) return pattern["Regex"].get<std::string>();
  if (pattern.contains("String") && pattern["String"].is_string()) {
    // A literal: every PCRE2 metacharacter escaped.
    std::string escaped;
    for (char c : pattern["String"].get<std::string>()) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
      escaped += c;
    }
    return escaped;
  }
  throw Error(file + ": a Split pre-tokenizer whose pattern is neither Regex nor String");
}

void collect(const json& pre, const std::string& file, std::vector<std::string>& patterns) {
  const std::string type = pre.value("type", std::string());
  if (type == "Sequence") {
    for (const json& step : pre.value("pretokenizers", json::array())) collect(step, file, patterns);
  } else if (type == "Split") {
    const std::string behavior = pre.value("behavior", std::string("Isolated"));
    if (behavior != "Isolated" || pre.value("invert", false))
      throw Error(file + ": a Split pre-tokenizer with behavior '" + behavior + "'" + (pre.value("invert", false) ? " inverted" : "") +
                  " (Loom reads byte-level BPE tokenizers whose splits are Isolated)");
    patterns.push_back(pattern_of(pre.value("pattern", json::object()), file));
  } else if (type == "Digits") {
    patterns.push_back(pre.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "ByteLevel") {
    if (pre.value("add_prefix_space", false))
      throw Error(file + ": a ByteLevel pre-tokenizer with add_prefix_space (Loom reads byte-level BPE tokenizers without one)");
    if (pre.value("use_regex", true)) patterns.push_back(kGpt2Pattern);
  } else {
    throw Error(file + ": pre-tokenizer '" + type + "' in a byte-level BPE tokenizer (Loom reads Sequence, Split, Digits and ByteLevel here)");
  }
}

}  // namespace

std::vector<std::string> byte_level_split_patterns(const json& pre_tokenizer, const std::string& file) {
  std::vector<std::string> patterns;
  if (!pre_tokenizer.is_object()) throw Error(file + ": a byte-level BPE tokenizer without a pre_tokenizer");
  collect(pre_tokenizer, file, patterns);
  return patterns;
}

std::string matching_pre_tokenizer(const std::vector<std::string>& patterns, bool ignore_merges, const std::string& file) {
  const std::vector<std::string_view> views(patterns.begin(), patterns.end());
  const std::vector<std::string> want = tokenizer::RegexSplitter(views).split(kProbe);
  std::vector<std::string> names(std::begin(kPreferred), std::end(kPreferred));
  for (const tokenizer::NamedPreTokenizer& named : tokenizer::named_pre_tokenizers()) {
    const std::string name(named.name);
    if (name != "default" && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const std::string& name : names) {
    const tokenizer::PreTokenizer candidate = tokenizer::PreTokenizer::for_name(name);
    if (candidate.ignore_merges() == ignore_merges && candidate.split(kProbe) == want) return name;
  }
  std::string listed;
  for (const std::string& p : patterns) listed += (listed.empty() ? "" : " then ") + p;
  throw Error(file + ": its pre-tokenizer (" + (listed.empty() ? "no split" : listed) + (ignore_merges ? ", ignore_merges" : "") +
              ") is none of the " + std::to_string(names.size()) + " that llama.cpp names, so a GGUF could not say which it is");
}

}  // namespace loom::hf
