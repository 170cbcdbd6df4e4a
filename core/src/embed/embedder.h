// Embedder — what serves /v1/embeddings: an encoder (TextEncoder: bert, nomic-bert) or a decoder used
// as one (DecoderEmbedder: Qwen3-Embedding). Token ids in, one vector per input out.
#pragma once

#include <cstdint>
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

}  // namespace loom::embed
