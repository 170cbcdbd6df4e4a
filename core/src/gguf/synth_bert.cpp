#include "gguf/synth_bert.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "gguf/synth_builder.h"

namespace loom::gguf {

namespace {

// llama.cpp's llama_token_type values.
constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3;

const char* const kWords[] = {"the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "was", "on", "with", "as", "be",
                              "at", "by", "this", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one",
                              "you", "were", "all", "there", "would", "their", "we", "when", "will", "more", "no", "if", "out",
                              "so", "what", "up", "about", "into", "than", "can", "only", "other", "new", "some", "time",
                              "two", "first", "like", "over", "after", "also", "many", "before", "through", "where", "much",
                              "way", "well", "down", "hello", "world", "loom", "model", "token", "text", "search", "query",
                              "document", "cat", "dog", "sat", "mat", "river", "bank", "money", "embedding", "vector"};

// BERT's vocabulary layout: the specials at their usual ids, then single characters, their
// continuations, whole words and a few suffixes, padded with continuation letter pairs to n_vocab. As
// llama.cpp's converter stores them: word-initial pieces start with U+2581, continuations lose "##".
void add_wordpiece_vocab(GgufWriter& writer, int n_vocab) {
  if (n_vocab < 300) throw Error("synthetic vocabulary: n_vocab " + std::to_string(n_vocab) + " is too small for BERT (at least 300)");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::set<std::string> seen;
  auto add = [&](const std::string& text, int32_t type) {
    if (int(tokens.size()) >= n_vocab || !seen.insert(text).second) return;
    tokens.push_back(text);
    types.push_back(type);
  };
  const std::string word_start = "\xe2\x96\x81";  // U+2581
  auto add_piece = [&](const std::string& piece) {  // "##x" continues a word; anything else starts one
    if (piece.rfind("##", 0) == 0) add(piece.substr(2), kTypeNormal);
    else add(word_start + piece, kTypeNormal);
  };
  add("[PAD]", kTypeControl);
  for (int i = 1; i < 100; i++) add("[unused" + std::to_string(i) + "]", kTypeNormal);
  add("[UNK]", kTypeUnknown);
  add("[CLS]", kTypeControl);
  add("[SEP]", kTypeControl);
  add("[MASK]", kTypeControl);
  const std::string chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'-:;()\"";
  for (char c : chars) add_piece(std::string(1, c));
  for (char c : chars) add_piece("##" + std::string(1, c));
  for (const char* word : kWords) add_piece(word);
  for (const char* suffix : {"##s", "##ed", "##ing", "##er", "##ly", "##tion"}) add_piece(suffix);
  for (char a = 'a'; a <= 'z'; ++a)
    for (char b = 'a'; b <= 'z'; ++b) add_piece(std::string("##") + a + b);
  // Larger vocabularies (MiniLM's 30,522) take two- and three-letter word starts and continuations.
  for (char a = 'a'; a <= 'z'; ++a)
    for (char b = 'a'; b <= 'z'; ++b) add_piece(std::string(1, a) + b);
  for (char a = 'a'; a <= 'z' && int(tokens.size()) < n_vocab; ++a)
    for (char b = 'a'; b <= 'z'; ++b)
      for (char c = 'a'; c <= 'z'; ++c) {
        add_piece(std::string(1, a) + b + c);
        add_piece(std::string("##") + a + b + c);
      }
  if (int(tokens.size()) < n_vocab) throw Error("synthetic vocabulary: BERT's synthetic pieces stop at " + std::to_string(tokens.size()) + " tokens");
  writer.set_string("tokenizer.ggml.model", "bert");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_int32_array("tokenizer.ggml.token_type", types);
  writer.set_uint32("tokenizer.ggml.token_type_count", 2);
  writer.set_uint32("tokenizer.ggml.bos_token_id", 101);
  writer.set_uint32("tokenizer.ggml.cls_token_id", 101);
  writer.set_uint32("tokenizer.ggml.seperator_token_id", 102);
  writer.set_uint32("tokenizer.ggml.padding_token_id", 0);
  writer.set_uint32("tokenizer.ggml.unknown_token_id", 100);
  writer.set_uint32("tokenizer.ggml.mask_token_id", 103);
}

}  // namespace

void build_bert_model(const SynthSpec& spec, GgufWriter& writer) {
  const std::string a = spec.arch;  // bert, nomic-bert, jina-bert-v2 or modern-bert
  const bool nomic = a == "nomic-bert", jina = a == "jina-bert-v2", modern = a == "modern-bert";
  writer.set_uint32(a + ".context_length", static_cast<uint32_t>(spec.n_ctx));
  writer.set_uint32(a + ".embedding_length", static_cast<uint32_t>(spec.dim));
  writer.set_uint32(a + ".block_count", static_cast<uint32_t>(spec.n_layers));
  writer.set_uint32(a + ".feed_forward_length", static_cast<uint32_t>(spec.ff_dim));
  writer.set_uint32(a + ".attention.head_count", static_cast<uint32_t>(spec.n_heads));
  writer.set_float32(a + ".attention.layer_norm_epsilon", modern ? 1e-5f : 1e-12f);
  writer.set_bool(a + ".attention.causal", false);
  if (nomic) {  // nomic-embed-text's rope: NEOX over the whole head at base 1000
    writer.set_uint32(a + ".rope.dimension_count", static_cast<uint32_t>(spec.dim / spec.n_heads));
    writer.set_float32(a + ".rope.freq_base", 1000.0f);
  }
  if (modern) {  // ModernBERT's bases (global 160000, local 10000); a window narrower than most inputs
    writer.set_uint32(a + ".rope.dimension_count", static_cast<uint32_t>(spec.dim / spec.n_heads));
    writer.set_float32(a + ".rope.freq_base", 160000.0f);
    writer.set_float32(a + ".rope.freq_base_swa", 10000.0f);
    writer.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window > 0 ? spec.sliding_window : 8));
  }
  // Mean pooling, as sentence-transformers' MiniLM; a reranker ranks: its [CLS] row through the heads.
  writer.set_uint32(a + ".pooling_type", spec.classifier ? 4 : 1);
  if (spec.classifier) writer.set_string_array(a + ".classifier.output_labels", {"LABEL_0"});
  add_wordpiece_vocab(writer, spec.n_vocab);

  ModelBuilder b(spec, writer);
  const int64_t d = spec.dim, ff = spec.ff_dim;
  const float in_scale = 1.0f / std::sqrt(float(d));
  b.matrix("token_embd.weight", d, spec.n_vocab, 0.5f);
  if (!modern) b.matrix_of(LOOM_DTYPE_F32, "token_types.weight", {d, 2}, 0.2f);
  if (a == "bert") b.matrix_of(LOOM_DTYPE_F32, "position_embd.weight", {d, spec.n_ctx}, 0.2f);  // the others: rope or ALiBi
  b.vector("token_embd_norm.weight", d, 1.0f, 0.1f);
  if (!modern) b.vector("token_embd_norm.bias", d, 0.0f, 0.1f);
  if (modern) b.vector("output_norm.weight", d, 1.0f, 0.1f);
  for (int il = 0; il < spec.n_layers; il++) {
    const std::string n = "blk." + std::to_string(il) + ".";
    // q and k larger than the rest, so the attention is far from uniform and a wrong mask shows.
    if (nomic || modern) {  // q, k, v in one matrix without biases
      b.matrix(n + "attn_qkv.weight", d, 3 * d, 1.5f * in_scale);
      b.matrix(n + "attn_output.weight", d, d, in_scale);
    } else {
      b.matrix(n + "attn_q.weight", d, d, 2.0f * in_scale);
      b.vector(n + "attn_q.bias", d, 0.0f, 0.1f);
      b.matrix(n + "attn_k.weight", d, d, 2.0f * in_scale);
      b.vector(n + "attn_k.bias", d, 0.0f, 0.1f);
      b.matrix(n + "attn_v.weight", d, d, in_scale);
      b.vector(n + "attn_v.bias", d, 0.0f, 0.1f);
      b.matrix(n + "attn_output.weight", d, d, in_scale);
      b.vector(n + "attn_output.bias", d, 0.0f, 0.1f);
    }
    if (modern) {  // pre-norm without biases; layer 0 reads the embedding norm's output directly
      if (il > 0) b.vector(n + "attn_norm.weight", d, 1.0f, 0.1f);
      b.vector(n + "ffn_norm.weight", d, 1.0f, 0.1f);
    } else {
      b.vector(n + "attn_output_norm.weight", d, 1.0f, 0.1f);
      b.vector(n + "attn_output_norm.bias", d, 0.0f, 0.1f);
    }
    if (nomic) b.matrix(n + "ffn_gate.weight", d, ff, in_scale);
    if (jina || modern) {
      b.matrix(n + "ffn_up.weight", d, 2 * ff, in_scale);  // GEGLU: gate rows, then up rows
    } else {
      b.matrix(n + "ffn_up.weight", d, ff, in_scale);
    }
    if (a == "bert") b.vector(n + "ffn_up.bias", ff, 0.0f, 0.1f);
    b.matrix(n + "ffn_down.weight", ff, d, 1.0f / std::sqrt(float(ff)));
    if (a == "bert" || jina) b.vector(n + "ffn_down.bias", d, 0.0f, 0.1f);
    if (!modern) {
      b.vector(n + "layer_output_norm.weight", d, 1.0f, 0.1f);
      b.vector(n + "layer_output_norm.bias", d, 0.0f, 0.1f);
    }
  }
  if (spec.classifier) {  // bge-reranker's head: tanh(dense(cls row)), then one logit; gte-reranker-modernbert's:
    // a layer norm of gelu(dense(mean of the rows)), then one logit
    b.matrix("cls.weight", d, d, in_scale);
    if (modern) b.vector("cls.norm.weight", d, 1.0f, 0.1f);
    else b.vector("cls.bias", d, 0.0f, 0.1f);
    b.matrix("cls.output.weight", d, 1, in_scale);
    b.vector("cls.output.bias", 1, 0.0f, 0.1f);
  }
}

}  // namespace loom::gguf
