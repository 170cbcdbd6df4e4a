// Which of llama.cpp's named pre-tokenizers (tokenizer.ggml.pre) a tokenizer.json's byte-level
// pre_tokenizer is. llama.cpp's converter decides by hashing the ids of a probe text, which needs the
// model's tokenizer running; Loom runs the checkpoint's own split regexes (PCRE2) and every named
// pattern set over a probe text that exercises what the patterns differ on (contractions, digit runs,
// letters with marks, CJK, newlines, space runs, symbols) and takes the name whose pieces are the same.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom::hf {

// The split patterns of a byte-level pre_tokenizer, in order: Split (Regex or String, "Isolated"),
// Digits, ByteLevel (its GPT-2 regex when use_regex) and Sequence of those. loom::Error naming `file`
// for another kind, behaviour or an add_prefix_space ByteLevel.
std::vector<std::string> byte_level_split_patterns(const nlohmann::json& pre_tokenizer, const std::string& file);

// The tokenizer.ggml.pre name whose pieces equal `patterns`' on the probe text and whose
// ignore_merges agrees; loom::Error naming `file` and the patterns when none does.
std::string matching_pre_tokenizer(const std::vector<std::string>& patterns, bool ignore_merges, const std::string& file);

}  // namespace loom::hf
