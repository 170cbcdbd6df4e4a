// tokenizer.json (Hugging Face's tokenizers format) as a GGUF file's tokenizer.ggml.* metadata, in the
// layout llama.cpp's converter writes, so Loom's tokenizers (and llama.cpp's) read it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"

namespace loom::hf {

// A WordPiece vocabulary (bert): word-initial pieces start with U+2581, continuations lose "##", special
// tokens (its added_tokens) stay as written and are control tokens; [CLS], [SEP], [PAD], [UNK] and [MASK]
// (or tokenizer_config.json's names for them) give the special ids. loom::Error naming the file for
// another model type, an id outside 0..n_vocab-1, a missing id or a missing special token.
void add_wordpiece_tokenizer(const std::filesystem::path& dir, gguf::GgufWriter& writer, int64_t n_vocab);

// A BPE tokenizer.json as llama.cpp's converter would write it. SentencePiece-style files (byte
// fallback: Llama 2, Mistral, Gemma, Phi-3) become its "llama" model: pieces as stored, <0xNN> byte
// tokens, scores from the merges' ranks, add_space_prefix from the normalizer or Metaspace. Byte-level
// files (GPT-2's scheme: Llama 3, Qwen, SmolLM, OLMo, gpt-oss, ...) become its "gpt2" model: pieces as stored, merges as "a b", added tokens as control (special, or named like
// one: <|...|>, <start_of_...>) or user-defined tokens, ids the file lacks up to config.json's
// vocab_size as unused "[PAD<id>]". tokenizer.ggml.pre is the llama.cpp name whose split patterns
// behave as the file's pre_tokenizer (pre_tokenizer_match.h). The special ids, add_bos_token and the
// chat template come from tokenizer_config.json (or chat_template.jinja), then config.json.
// loom::Error naming the file for a model or pre-tokenizer Loom does not map, or a malformed entry.
// BpeVocab::gemma4 writes a SentencePiece-style file as llama.cpp's "gemma4" model instead, as its
// converter does for Gemma 4: pieces and merges as stored, merged by rank.
enum class BpeVocab { as_published, gemma4 };
void add_bpe_tokenizer(const std::filesystem::path& dir, const nlohmann::json& config, gguf::GgufWriter& writer, int64_t n_vocab,
                       BpeVocab vocab = BpeVocab::as_published);

}  // namespace loom::hf
