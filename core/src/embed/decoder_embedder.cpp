#include "embed/decoder_embedder.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"

namespace loom::embed {

Pooling decoder_pooling(const gguf::GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  const uint64_t pooling = file.get_uint(arch + ".pooling_type").value_or(0);
  return pooling <= 4 ? Pooling(pooling) : Pooling::none;
}

ClassifierHead read_classifier_head(const gguf::GgufFile& file, int64_t dim) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  if (arch != "qwen3" && arch != "qwen3vl")
    throw Error(file.label() + ": rank pooling of a decoder is Qwen3-Reranker's (qwen3, qwen3vl), not " + arch + "'s");
  const gguf::TensorInfo* t = file.find_tensor("cls.output.weight");
  if (t == nullptr || t->dims.size() != 2 || t->dims[0] != dim || t->dims[1] < 1)
    throw Error(file.label() + ": a reranker (rank pooling) needs tensor 'cls.output.weight' [" + std::to_string(dim) + ", labels]");
  if (dtype_traits(t->type) == nullptr) throw Error(file.label() + ": tensor 'cls.output.weight' has type " + dtype_name(t->type) + ", which Loom cannot read");
  return {dequantize_rows(t->type, file.tensor_data(*t), t->n_elements), t->dims[1]};
}

DecoderEmbedder::DecoderEmbedder(std::unique_ptr<Model> model, const std::string& name, Pooling pooling, int64_t max_tokens, ClassifierHead head)
    : model_(std::move(model)), head_(std::move(head)), max_tokens_(max_tokens) {
  const ModelInfo& m = model_->info();
  if (pooling == Pooling::rank && head_.n_out < 1) throw Error(name + ": rank pooling needs the reranker's classification head (cls.output)");
  if (pooling != Pooling::mean && pooling != Pooling::last && pooling != Pooling::cls && pooling != Pooling::rank)
    throw Error(name + ": a decoder model embeds with mean, cls, last or rank pooling, not " + pooling_name(pooling));
  if (pooling == Pooling::rank && int64_t(head_.weight.size()) != head_.n_out * m.dim)
    throw Error(name + ": the classification head has " + std::to_string(head_.weight.size()) + " values, not " + std::to_string(head_.n_out) + " rows of " +
                std::to_string(m.dim));
  if (m.is_hybrid()) throw Error(name + ": a hybrid model (" + m.arch_name + ") cannot serve embeddings yet");
  for (bool local : m.layer_is_local)
    if (local && m.sliding_window > 0) throw Error(name + ": a model with sliding-window layers (" + m.arch_name + ") cannot serve embeddings yet");
  info_.arch = m.arch_name;
  info_.name = m.name;
  info_.dim = info_.pooled_dim = m.dim;
  info_.n_layers = m.n_layers;
  info_.n_heads = m.n_heads;
  info_.n_kv_heads = m.n_kv_heads;
  info_.head_dim = m.head_dim;
  info_.ff_dim = m.ff_dim;
  info_.n_vocab = m.n_vocab;
  info_.n_ctx_train = std::min<int64_t>(m.n_ctx_train, max_tokens);
  info_.pooling = pooling;
  info_.n_cls_out = pooling == Pooling::rank ? head_.n_out : 0;
  // One batch's rows, plus a partial block per sequence in it.
  n_blocks_ = uint32_t((max_tokens + block_size_ - 1) / block_size_ + 256);
  kv_ = model_->create_kv_cache(n_blocks_, block_size_, LOOM_DTYPE_F16);
}

std::vector<std::vector<float>> DecoderEmbedder::embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) {
  check_inputs(inputs, std::min(info_.n_ctx_train, max_tokens_), "", info_.n_vocab);
  const auto c = size_t(info_.dim);
  const auto bs = int32_t(block_size_);
  std::vector<std::vector<float>> out(inputs.size());
  std::vector<float> hidden;
  size_t next = 0;
  while (next < inputs.size()) {
    // As many whole inputs as fit the rows and the blocks, each its own sequence from position 0.
    ForwardBatch batch;
    std::vector<size_t> members;
    int32_t block = 0;
    while (next < inputs.size()) {
      const auto len = int32_t(inputs[next].size());
      const int32_t blocks = (len + bs - 1) / bs;
      if (!members.empty() && (int64_t(batch.tokens.size()) + len > max_tokens_ || block + blocks > int32_t(n_blocks_))) break;
      ForwardBatch::Seq seq;
      seq.first_row = int32_t(batch.tokens.size());
      seq.n_query = len;
      seq.context_len = len;
      for (int32_t b = 0; b < blocks; b++) seq.block_table.push_back(block + b);
      for (int32_t p = 0; p < len; p++) {
        batch.tokens.push_back(inputs[next][size_t(p)]);
        batch.positions.push_back(p);
        batch.slot_mapping.push_back((block + p / bs) * bs + p % bs);
        // The last row only, or every row for the mean.
        const bool last = info_.pooling == Pooling::last || info_.pooling == Pooling::rank;  // rank: causal, so the last row
        if (info_.pooling == Pooling::mean || (last && p == len - 1) || (info_.pooling == Pooling::cls && p == 0))
          batch.logit_rows.push_back(int32_t(batch.tokens.size()) - 1);
      }
      block += blocks;
      batch.seqs.push_back(std::move(seq));
      members.push_back(next++);
    }
    model_->forward_hidden(batch, kv_, hidden);
    size_t row = 0;
    for (size_t member : members) {
      // The rows asked for: every row of the input (mean), or the one pooled.
      const size_t rows = info_.pooling == Pooling::mean ? inputs[member].size() : 1;
      out[member] = info_.pooling == Pooling::rank ? classify(&hidden[row * c]) : pool_rows(&hidden[row * c], rows, c, normalize);
      row += rows;
    }
  }
  return out;
}

std::vector<float> DecoderEmbedder::classify(const float* row) const {
  // The head's logits, then their softmax (llama.cpp's rank pooling for qwen3), in double.
  const auto c = size_t(info_.dim);
  std::vector<double> logits(size_t(head_.n_out));
  double max = -1e300;
  for (size_t o = 0; o < logits.size(); o++) {
    double sum = 0.0;
    for (size_t i = 0; i < c; i++) sum += double(head_.weight[o * c + i]) * row[i];
    logits[o] = sum;
    max = std::max(max, sum);
  }
  double total = 0.0;
  for (double& l : logits) total += l = std::exp(l - max);
  std::vector<float> scores;
  for (double l : logits) scores.push_back(float(l / total));
  return scores;
}

}  // namespace loom::embed
