// DecoderEmbedder — a generative (decoder) model used as an embedder, as Qwen3-Embedding is: each input
// runs as its own causal sequence through the model, and its final-normed hidden rows are pooled (the
// last row, or the mean of all rows) into one embedding, L2-normalised when asked. The pooling comes
// from the file (`<arch>.pooling_type`, as llama.cpp's converter writes it for embedding models) or
// from [model] pooling.
//
// Qwen3-Reranker is a decoder too (rank pooling): its last row through cls.output, the lm_head's rows
// of "yes" and "no" as llama.cpp's converter keeps them, then a softmax, so a pair's score is P(yes).
//
// The KV cache is scratch: a batch's blocks are free again after its pass, so it only needs one batch
// of max_tokens rows. Not thread-safe: one embed() at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "embed/text_encoder.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace loom::embed {

// A reranker's classification head: n_out rows of the model's width, row-major.
struct ClassifierHead {
  std::vector<float> weight;
  int64_t n_out = 0;
};
// cls.output.weight of a decoder reranker (qwen3, qwen3vl); loom::Error naming the file when it is
// missing or misshapen, or when the architecture has no rank pooling.
ClassifierHead read_classifier_head(const gguf::GgufFile& file, int64_t dim);

class DecoderEmbedder : public Embedder {
 public:
  // loom::Error for a pooling it cannot do (none; rank without a head), a hybrid model, or a model with
  // sliding windows (their rings would have to be sized per sequence).
  DecoderEmbedder(std::unique_ptr<Model> model, const std::string& name, Pooling pooling, int64_t max_tokens, ClassifierHead head = {});

  const TextEncoderInfo& info() const override { return info_; }
  int64_t max_tokens() const override { return max_tokens_; }
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) override;

 private:
  std::vector<float> classify(const float* row) const;
  std::unique_ptr<Model> model_;
  ClassifierHead head_;
  TextEncoderInfo info_;
  int64_t max_tokens_ = 0;
  uint32_t block_size_ = 16, n_blocks_ = 0;
  KvCache kv_;
};

// The pooling a decoder GGUF asks for (<arch>.pooling_type; rank for Qwen3-Reranker), or none.
Pooling decoder_pooling(const gguf::GgufFile& file);

}  // namespace loom::embed
