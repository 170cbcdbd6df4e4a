// The pre-tokenizers of byte-level BPE vocabularies that llama.cpp knows, by `tokenizer.ggml.pre`
// name: each a sequence of split regexes (PCRE2 syntax). Generated into pre_tokenizer_table.cpp by
// gen_pre_tokenizer_table.py.
#pragma once

#include <string_view>
#include <vector>

namespace loom::tokenizer {

struct PatternSet {
  std::string_view id;                     // llama.cpp's pre-tokenizer type, lower case
  std::vector<std::string_view> patterns;  // applied in order, each to the pieces the last one left
};

struct NamedPreTokenizer {
  std::string_view name;  // a tokenizer.ggml.pre value
  size_t pattern_set;     // index into pre_tokenizer_pattern_sets()
  bool ignore_merges;     // a piece that is itself a vocabulary entry is taken whole
};

const std::vector<PatternSet>& pre_tokenizer_pattern_sets();
const std::vector<NamedPreTokenizer>& named_pre_tokenizers();

}  // namespace loom::tokenizer
