// The tokenization algorithms, applied to one fragment of raw text (special tokens already split off).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace loom::tokenizer {

// SentencePiece (llama.cpp's SPM): `text` must already have spaces escaped as U+2581. Repeatedly merges
// the adjacent pair whose merged text is the highest-scoring token; leftovers fall back to <0xXX>.
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// Byte-level BPE: pre-tokenize, map bytes to printable code points, merge pairs by rank per word.
// `ignore_merges`: a word that is itself a token is emitted whole (Llama 3).
void bpe_encode(const Vocab& vocab, const PreTokenizer& pre, std::string_view text,
                std::vector<int32_t>& out);

// WordPiece (BERT): normalise, split into words, cut each into the longest vocabulary pieces.
void wordpiece_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

}  // namespace loom::tokenizer
