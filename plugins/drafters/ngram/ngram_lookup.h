// Prompt-lookup decoding: the tokens that followed the last occurrence of the sequence's suffix.
#pragma once

#include <cstdint>

namespace loom::drafters {

struct NgramOptions {
  uint32_t ngram_max = 3;  // longest suffix tried first
  uint32_t ngram_min = 1;  // shortest suffix still worth a proposal
};

// Finds the longest suffix of `tokens` (length ngram_max down to ngram_min) that also occurs earlier,
// takes its most recent earlier occurrence and writes up to `max_draft` of the tokens that followed
// it to `out`. Proposals stop at a token outside [0, n_vocab). Returns how many were written.
uint32_t ngram_propose(const int32_t* tokens, uint32_t n_tokens, uint32_t n_vocab, const NgramOptions& options,
                       uint32_t max_draft, int32_t* out);

}  // namespace loom::drafters
