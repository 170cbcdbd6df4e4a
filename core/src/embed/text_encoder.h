// TextEncoder — an encoder-only text model (the BERT family: all-MiniLM, bge, e5) on a backend: the
// token ids of several inputs in, one pooled embedding per input out. The forward is a list of ABI ops
// like the vision encoder's (GET_ROWS, LAYER_NORM, MATMUL, ATTENTION with one sequence per input,
// UNARY GELU), so it runs on any backend with the encoder ops (ABI 1.9):
//
//   bert: x = tok_embd[token] + token_types[0] + pos_embd[position in its input]; x = ln(x)
//         per layer: x = ln1(x + out(attn(q(x), k(x), v(x))))     (every row sees its whole input)
//                    x = ln2(x + down(gelu(up(x))))
//         then per input: the mean of its rows (or its first, or its last), as the file's pooling_type
//   nomic-bert (nomic-embed-text): bert without the position table; q and k turn by NEOX rope (from one
//         fused matrix), and the FFN is down(silu(gate(x)) * up(x))
//
// Inputs are packed into batches of at most max_tokens rows; an input attends only to its own rows,
// so an input's embedding does not depend on what else ran in its batch (to float summation order).
//
// Not thread-safe: one embed() at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "embed/embedder.h"

namespace loom {
namespace gguf {
class GgufFile;
}

namespace embed {

// llama.cpp's pooling types (LLAMA_POOLING_TYPE_*): how an input's rows become one embedding.
// rank: a cross-encoder's score, its first row through the classification heads (bge-reranker).
enum class Pooling { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };
const char* pooling_name(Pooling pooling);

struct TextEncoderInfo {
  std::string arch;  // general.architecture
  std::string name;  // general.name
  int64_t dim = 0, n_layers = 0, n_heads = 0, head_dim = 0, ff_dim = 0, n_vocab = 0;
  int64_t n_ctx_train = 0;  // the position table's length: the longest input
  float eps = 1e-12f;
  Pooling pooling = Pooling::mean;
  int64_t n_cls_out = 0;  // rank: the scores per input (cls.output's rows; 1 for a reranker)
  // nomic-bert: rotary positions (NEOX over n_rot dims at rope_base) in place of the position table,
  // and a SiLU-gated FFN.
  bool rope = false, ffn_gated = false;
  int64_t n_rot = 0;
  float rope_base = 10000.0f;
  int64_t output_width() const { return pooling == Pooling::rank ? n_cls_out : dim; }
};

// True when the file's architecture is an encoder Loom runs as a TextEncoder ("bert").
bool is_text_encoder(const gguf::GgufFile& file);
// loom::Error naming the file and the key or tensor when it is not a text encoder Loom runs.
TextEncoderInfo read_text_encoder_info(const gguf::GgufFile& file);

class TextEncoder : public Embedder {
 public:
  // max_tokens: the most rows one batch holds (at least the longest input it will be given).
  static std::unique_ptr<TextEncoder> load(const gguf::GgufFile& file, Backend& backend, int64_t max_tokens);
  ~TextEncoder() override;
  TextEncoder(const TextEncoder&) = delete;
  TextEncoder& operator=(const TextEncoder&) = delete;

  const TextEncoderInfo& info() const override { return info_; }
  int64_t max_tokens() const override { return max_tokens_; }

  // One embedding of info().dim values per input, pooled as info().pooling, and L2-normalised when
  // `normalize`; a reranker's (rank pooling) info().n_cls_out scores per input instead, never
  // normalised. loom::Error naming the input for an empty one, one longer than the model's context or
  // max_tokens, or a token id outside the vocabulary.
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) override;

 private:
  struct LayerWeights {
    loom_tensor wq, bq, wk, bk, wv, bv, wo, bo, ln1_w, ln1_b, up, up_b, down, down_b, ln2_w, ln2_b;
    loom_tensor qkv, qkv_b, gate;  // a fused q/k/v matrix (wq, wk, wv its row ranges); the gated FFN's gate
  };
  TextEncoder(TextEncoderInfo info, Backend& backend, int64_t max_tokens);
  void load_weights(const gguf::GgufFile& file);
  void build_ops(int64_t n_tok, int64_t n_seqs);
  // The final rows of one batch of inputs, [n_tok][dim] row-major.
  std::vector<float> run_batch(const std::vector<const std::vector<int32_t>*>& batch);

  TextEncoderInfo info_;
  Backend& backend_;
  int64_t max_tokens_ = 0;
  Buffer weights_, compute_;
  loom_tensor tok_embd_{}, type_row_{}, pos_embd_{}, tok_norm_w_{}, tok_norm_b_{};
  std::vector<LayerWeights> layers_;
  // rank: the classification heads, on the host (one row per input): tanh(cls x + cls_b), then
  // cls_out · + cls_out_b. cls may be absent.
  std::vector<float> cls_, cls_b_, cls_out_, cls_out_b_;
  std::vector<float> classify(const float* row) const;
  std::vector<loom_op> ops_;
  int64_t ops_tok_ = 0, ops_seqs_ = 0;  // the batch shape ops_ is built for
  struct Scratch {
    uint64_t tokens, positions, seqs, x, h, q, k, v, a, ffn, ffn_up;
  } at_{};
  loom_norm_params norm_{};
  loom_encoder_attention_params attn_{};
  loom_glu_params gelu_{}, silu_{};
  loom_rope_params rope_{};
};

}  // namespace embed
}  // namespace loom
