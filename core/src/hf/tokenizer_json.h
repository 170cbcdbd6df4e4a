// tokenizer.json (Hugging Face's tokenizers format) as a GGUF file's tokenizer.ggml.* metadata, in the
// layout llama.cpp's converter writes, so Loom's tokenizers (and llama.cpp's) read it.
#pragma once

#include <cstdint>
#include <filesystem>

#include "gguf/gguf_writer.h"

namespace loom::hf {

// A WordPiece vocabulary (bert): word-initial pieces start with U+2581, continuations lose "##", special
// tokens (its added_tokens) stay as written and are control tokens; [CLS], [SEP], [PAD], [UNK] and [MASK]
// (or tokenizer_config.json's names for them) give the special ids. loom::Error naming the file for
// another model type, an id outside 0..n_vocab-1, a missing id or a missing special token.
void add_wordpiece_tokenizer(const std::filesystem::path& dir, gguf::GgufWriter& writer, int64_t n_vocab);

}  // namespace loom::hf
