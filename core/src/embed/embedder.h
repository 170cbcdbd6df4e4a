// Embedder — what serves /v1/embeddings: an encoder (TextEncoder: bert, nomic-bert) or a decoder used
// as one (DecoderEmbedder: Qwen3-Embedding). Token ids in, one vector per input out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::embed {

struct TextEncoderInfo;

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual const TextEncoderInfo& info() const = 0;
  virtual int64_t max_tokens() const = 0;  // the most rows one batch holds
  // One vector per input (see TextEncoder::embed); loom::Error naming the input when it cannot run.
  virtual std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) = 0;
};

// loom::Error naming the input: empty, longer than `longest` tokens (`limit` says why, e.g. " (its
// context)"), or holding a token id outside 0..n_vocab-1.
void check_inputs(const std::vector<std::vector<int32_t>>& inputs, int64_t longest, const std::string& limit, int64_t n_vocab);
// The mean of `count` rows of `dim` values (one row: that row), L2-normalised when `normalize`; summed
// in double, so a row's place in a batch does not change its vector.
std::vector<float> pool_rows(const float* rows, size_t count, size_t dim, bool normalize);

}  // namespace loom::embed
