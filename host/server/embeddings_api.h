// POST /v1/embeddings — OpenAI's embeddings request over an Embedder (an encoder or a decoder): parsing and checking the
// request (every refusal a 400 naming the field), tokenizing, truncation (vLLM's
// truncate_prompt_tokens), Matryoshka `dimensions` (cut, then renormalised) and the float or base64
// response with its usage.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "embed/text_encoder.h"
#include "server/embedding_batcher.h"
#include "tokenizer/tokenizer.h"

namespace loom::server {

// A rerank template (tokenizer.chat_template.rerank) with every {query} and {document} filled in.
std::string fill_rerank_template(std::string prompt, const std::string& query, const std::string& document);

struct EmbeddingLimits {
  int64_t max_inputs = 2048;  // inputs per request ([server] max_embedding_inputs)
  // A reranker's prompt with {query} and {document} (the GGUF's tokenizer.chat_template.rerank:
  // Qwen3-Reranker's); empty: llama-server's plain pair layout.
  std::string rerank_template;
};

// One encoder shared by the server's handler threads; the inputs of requests that arrive together run
// in the same batches (EmbeddingBatcher).
class EmbeddingService {
 public:
  EmbeddingService(embed::Embedder& encoder, const Tokenizer& tokenizer, std::string model_name, EmbeddingLimits limits)
      : encoder_(encoder), batcher_(encoder), tokenizer_(tokenizer), model_name_(std::move(model_name)), limits_(std::move(limits)) {}

  const std::string& model_name() const { return model_name_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const embed::TextEncoderInfo& info() const { return encoder_.info(); }

  // The response bodies; ApiError (400) naming the field for a bad request, or the model's task when
  // an embedding model is asked to rerank or a reranker to embed.
  nlohmann::json embeddings(const nlohmann::json& request);
  // POST /v1/rerank (the Jina/Cohere shape vLLM and llama-server take): query, documents, top_n,
  // return_documents; each (query, document) pair scored by the cross-encoder, best first.
  nlohmann::json rerank(const nlohmann::json& request);
  // POST /v1/score (vLLM): text_1 (a string, or a list as long as text_2's) against text_2 (a string or
  // a list) → one score per pair, in order.
  nlohmann::json score(const nlohmann::json& request);
  bool is_reranker() const { return encoder_.info().pooling == embed::Pooling::rank; }

 private:
  embed::Embedder& encoder_;
  EmbeddingBatcher batcher_;  // concurrent requests' inputs run together
  const Tokenizer& tokenizer_;
  const std::string model_name_;
  const EmbeddingLimits limits_;
  // The pairs' scores (llama-server's layout: the rerank template with both filled in, its specials
  // parsed, or [BOS] query [EOS] [SEP] document [EOS]); `where` names each
  // second text in errors ("documents[i]", "text_2[i]").
  std::vector<int32_t> plain_pair(const std::string& first, const std::string& second, int32_t eos) const;
  std::vector<float> score_pairs(const std::vector<std::string>& firsts, const std::vector<std::string>& seconds, const std::string& where,
                                 int64_t& total_tokens);
};

// The float32 values little-endian, base64-encoded (OpenAI's encoding_format "base64").
std::string base64_floats(const std::vector<float>& values);

}  // namespace loom::server
