// RegexSplitter — a pre-tokenizer made of split regexes, as Hugging Face tokenizers' Sequence of
// Split(pattern, behavior="isolated") pre-tokenizers: each regex, in turn, cuts every piece into its
// matches and the text between them, both kept, in order. PCRE2 in UTF mode with Unicode properties
// (\p{L}, \p{N}, scripts) and look-around, which the models' patterns use and std::regex lacks.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

class RegexSplitter {
 public:
  // loom::Error naming the pattern and PCRE2's complaint when one does not compile.
  explicit RegexSplitter(const std::vector<std::string_view>& patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // The pieces of `text` (valid UTF-8), in order; their concatenation is `text`.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace loom::tokenizer
