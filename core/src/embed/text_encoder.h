// TextEncoder — an encoder-only text model on a backend: the token ids of several inputs in, one pooled
// embedding per input out. The forward is a list of ABI ops like the vision encoder's (GET_ROWS,
// LAYER_NORM or RMS_NORM, MATMUL, ROPE, ATTENTION with one sequence per input, GLU), so it runs on any
// backend with the encoder ops (ABI 1.9; the window and ALiBi, 1.14). The families differ in a few
// choices (encoder_families.cpp reads them from the file), over three block shapes:
//
//   post-norm (bert, nomic-bert, jina-bert-v2): x = ln1(x + out(attn(x))); x = ln2(x + ffn(x))
//   pre-norm (modern-bert):  x = x + out(attn(ln1(x))); x = x + ffn(ln2(x)); then a final norm
//   sandwich (gemma-embedding): x = x + post1(out(attn(norm1(x)))); x = x + post2(ffn(norm2(x))); final norm
//
// where positions come from a table (bert), rope (nomic-bert, modern-bert, gemma-embedding) or ALiBi
// (jina-bert-v2); the FFN is down(gelu(up x)), or gated: down(act(gate x) * up x); local layers
// (modern-bert, gemma-embedding) attend within a symmetric window. Then per input: the mean of its
// rows (or its first, or its last), as the file's pooling_type, and EmbeddingGemma's dense projections.
//
// Inputs are packed into batches of at most max_tokens rows; an input attends only to its own rows,
// so an input's embedding does not depend on its batch (to float summation order).
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

enum class EncoderBlock { post_norm, pre_norm, sandwich };
enum class EncoderPositions { table, rope, alibi };
// gelu: down(gelu(up x)); silu_gated / gelu_gated: down(act(gate x) * up x), the gate from its own
// matrix or the first half of a fused up matrix (GEGLU).
enum class EncoderFfn { gelu, silu_gated, gelu_gated };

struct TextEncoderInfo {
  std::string arch;  // general.architecture
  std::string name;  // general.name
  int64_t dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ff_dim = 0, n_vocab = 0;
  int64_t n_ctx_train = 0;  // the longest input (the position table's length)
  float eps = 1e-12f;
  Pooling pooling = Pooling::mean;
  int64_t n_cls_out = 0;  // rank: the scores per input (cls.output's rows; 1 for a reranker)
  Pooling classifier_pooling = Pooling::cls;  // rank: what the heads see (modern-bert: the mean of the rows)
  EncoderBlock block = EncoderBlock::post_norm;
  EncoderPositions positions = EncoderPositions::table;
  EncoderFfn ffn = EncoderFfn::gelu;
  bool rms_norm = false;      // RMS norms (gemma-embedding) in place of layer norms
  bool norm_bias = true;      // the layer norms have biases (not modern-bert's)
  bool qk_norm = false;       // an RMS norm of each q and k head (gemma-embedding)
  int64_t n_rot = 0;          // rope: NEOX over n_rot dims, at rope_base (global) or rope_base_local
  float rope_base = 10000.0f, rope_base_local = 10000.0f, rope_scale = 1.0f;
  uint32_t window = 0;            // local layers' symmetric window (ABI 1.14)
  std::vector<bool> layer_local;  // per layer: attends within the window
  float alibi_max_bias = 0.0f;    // jina-bert-v2 (ABI 1.14)
  float attn_scale = 0.0f;        // 0: 1/sqrt(head_dim)
  float embed_scale = 1.0f;       // gemma-embedding: sqrt(dim)
  // The pooled vector's width: dim, or the last dense projection's (EmbeddingGemma's dense_3).
  int64_t pooled_dim = 0;
  int64_t output_width() const { return pooling == Pooling::rank ? n_cls_out : pooled_dim; }
  bool needs_abi_1_14() const { return window != 0 || alibi_max_bias != 0.0f; }
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
    loom_tensor qkv, qkv_b, gate, gate_b;  // a fused q/k/v matrix (wq, wk, wv its row ranges); the gated FFN's gate
    loom_tensor q_norm, k_norm, post1, post2;  // gemma-embedding: per-head q/k norms, the sandwich's post norms
    loom_tensor q_ln_w, q_ln_b, k_ln_w, k_ln_b;  // jina-bert-v2 (some): layer norms of the whole q and k
    loom_tensor ln1b_w, ln1b_b;  // jina-bert-v2 (some): a second norm after attention, over x + ln1(...)
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
  loom_tensor tok_embd_{}, type_row_{}, pos_embd_{}, tok_norm_w_{}, tok_norm_b_{}, out_norm_{};
  std::vector<LayerWeights> layers_;
  // rank: the classification heads, on the host (one row per input): tanh(cls x + cls_b) (modern-bert:
  // a layer norm of gelu(cls x + cls_b)), then cls_out · + cls_out_b. cls may be absent.
  std::vector<float> cls_, cls_b_, cls_norm_, cls_out_, cls_out_b_;  // cls_norm_: modern-bert's head norm
  std::vector<float> classify(const float* row) const;
  // gemma-embedding: the sentence-transformers dense projections after pooling, on the host.
  struct Dense {
    std::vector<float> w, b;
    int64_t n_in = 0, n_out = 0;
  };
  std::vector<Dense> dense_;
  std::vector<float> project(const std::vector<float>& pooled) const;
  void load_host_tensors(const gguf::GgufFile& file);
  std::vector<loom_op> ops_;
  int64_t ops_tok_ = 0, ops_seqs_ = 0;  // the batch shape ops_ is built for
  struct Scratch {
    uint64_t tokens, positions, seqs, x, h, n, q, k, v, a, ffn, ffn_up;
  } at_{};
  loom_norm_params norm_{};
  loom_encoder_attention_params attn_global_{}, attn_local_{};
  loom_glu_params gelu_{}, silu_{};
  loom_rope_params rope_global_{}, rope_local_{};
  loom_scale_params embed_scale_{};
};

}  // namespace embed
}  // namespace loom
