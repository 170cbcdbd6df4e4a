// tokenizer.json's Unigram model (XLM-RoBERTa, T5, multilingual E5, BGE-M3) as llama.cpp's "t5"
// vocabulary: pieces and scores by id, the Precompiled normalizer's character map, and the space
// handling tokenizers runs (tokenizer.ggml.loom.metaspace; see tokenizer/vocab.h).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_writer.h"

namespace loom::hf {

// Writes tokenizer.ggml.model "t5", its tokens, scores, types, charsmap and space keys; returns the id
// of every piece and added token. loom::Error naming the file for a normalizer or pre-tokenizer Loom
// does not run, or a malformed entry.
std::map<std::string, int64_t> add_unigram_vocab(const nlohmann::json& tok, const std::string& file, gguf::GgufWriter& writer, int64_t n_vocab);

}  // namespace loom::hf
