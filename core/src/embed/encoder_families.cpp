// The text encoder families Loom runs, each a short description read from its GGUF keys and tensor
// shapes (as the vendored llama.cpp's src/models/{bert,nomic-bert,jina-bert-v2,modern-bert,
// gemma-embedding}.cpp read them); text_encoder.cpp builds the forward from the description.
#include <cmath>

#include "common/error.h"
#include "embed/text_encoder.h"
#include "gguf/gguf_file.h"

namespace loom::embed {

namespace {

const char* const kArchs[] = {"bert", "nomic-bert", "jina-bert-v2", "modern-bert", "gemma-embedding"};

uint64_t required_uint(const gguf::GgufFile& file, const std::string& key, uint64_t lo, uint64_t hi) {
  const auto v = file.get_uint(key);
  if (!v) throw Error(file.label() + ": metadata '" + key + "' is missing");
  if (*v < lo || *v > hi)
    throw Error(file.label() + ": metadata '" + key + "' is " + std::to_string(*v) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return *v;
}

int64_t tensor_rows(const gguf::GgufFile& file, const std::string& name) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  return t != nullptr && t->dims.size() == 2 ? t->dims[1] : 0;
}

// Which layers attend within the window: the file's per-layer pattern, or every layer but each
// `period`-th (dense_first: modern-bert's layers 0, 3, 6...) or but the last of each period (Gemma 3's).
std::vector<bool> local_layers(const gguf::GgufFile& file, const std::string& a, int64_t n_layers, uint64_t period, bool dense_first) {
  std::vector<bool> local = file.get_bool_array(a + "attention.sliding_window_pattern");
  if (!local.empty()) {
    if (int64_t(local.size()) != n_layers)
      throw Error(file.label() + ": " + a + "attention.sliding_window_pattern has " + std::to_string(local.size()) + " entries for " +
                  std::to_string(n_layers) + " layers");
    return local;
  }
  period = file.get_uint(a + "attention.sliding_window_pattern").value_or(period);
  local.resize(size_t(n_layers));
  for (int64_t il = 0; il < n_layers; il++)
    local[size_t(il)] = period == 0 || (dense_first ? il % int64_t(period) != 0 : il % int64_t(period) < int64_t(period) - 1);
  return local;
}

void read_rope(const gguf::GgufFile& file, const std::string& a, TextEncoderInfo& info) {
  info.positions = EncoderPositions::rope;
  info.n_rot = int64_t(file.get_uint(a + "rope.dimension_count").value_or(uint64_t(info.head_dim)));
  if (info.n_rot < 2 || info.n_rot > info.head_dim || info.n_rot % 2 != 0)
    throw Error(file.label() + ": " + a + "rope.dimension_count " + std::to_string(info.n_rot) + " must be even and at most the head size " +
                std::to_string(info.head_dim));
  info.rope_base = float(file.get_float(a + "rope.freq_base").value_or(10000.0));
  info.rope_base_local = float(file.get_float(a + "rope.freq_base_swa").value_or(10000.0));
  const std::string scaling = file.get_string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear") info.rope_scale = 1.0f / float(file.get_float(a + "rope.scaling.factor").value_or(1.0));
  else if (scaling != "none") throw Error(file.label() + ": " + a + "rope.scaling.type '" + scaling + "' is not supported by the text encoder (linear)");
}

}  // namespace

bool is_text_encoder(const gguf::GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  for (const char* known : kArchs)
    if (arch == known) return true;
  return false;
}

TextEncoderInfo read_text_encoder_info(const gguf::GgufFile& file) {
  TextEncoderInfo info;
  info.arch = file.get_string("general.architecture").value_or("");
  if (!is_text_encoder(file))
    throw Error(file.label() + ": architecture '" + info.arch + "' is not a text encoder Loom runs (bert, nomic-bert, jina-bert-v2, modern-bert, gemma-embedding)");
  info.name = file.get_string("general.name").value_or("");
  const std::string a = info.arch + ".";
  const bool gemma = info.arch == "gemma-embedding";
  info.dim = int64_t(required_uint(file, a + "embedding_length", 1, 65536));
  info.n_layers = int64_t(required_uint(file, a + "block_count", 1, 512));
  info.n_heads = int64_t(required_uint(file, a + "attention.head_count", 1, 1024));
  info.n_kv_heads = int64_t(file.get_uint(a + "attention.head_count_kv").value_or(uint64_t(info.n_heads)));
  info.ff_dim = int64_t(required_uint(file, a + "feed_forward_length", 1, 1 << 20));
  info.n_ctx_train = int64_t(required_uint(file, a + "context_length", 1, 1 << 20));
  if (info.n_kv_heads < 1 || info.n_heads % info.n_kv_heads != 0)
    throw Error(file.label() + ": " + a + "attention.head_count_kv " + std::to_string(info.n_kv_heads) + " does not divide head_count " +
                std::to_string(info.n_heads));
  if (const auto key_length = file.get_uint(a + "attention.key_length")) {
    info.head_dim = int64_t(*key_length);
  } else {
    if (info.dim % info.n_heads != 0)
      throw Error(file.label() + ": embedding_length " + std::to_string(info.dim) + " is not a multiple of head_count " + std::to_string(info.n_heads));
    info.head_dim = info.dim / info.n_heads;
  }
  if (!gemma && (info.head_dim * info.n_heads != info.dim || info.n_kv_heads != info.n_heads))
    throw Error(file.label() + ": " + info.arch + " needs head_count x key_length = embedding_length and no grouped heads");
  info.eps = float(file.get_float(a + (gemma ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon")).value_or(gemma ? 1e-6 : 1e-12));
  info.layer_local.assign(size_t(info.n_layers), false);
  if (info.arch == "nomic-bert") {
    read_rope(file, a, info);
    info.ffn = EncoderFfn::silu_gated;
  } else if (info.arch == "jina-bert-v2") {
    // ALiBi at llama.cpp's fixed max bias; a GELU-gated FFN when the gate is its own matrix or the
    // first half of ffn_up.
    info.positions = EncoderPositions::alibi;
    info.alibi_max_bias = float(file.get_float(a + "attention.max_alibi_bias").value_or(8.0));
    const bool gated = file.find_tensor("blk.0.ffn_gate.weight") != nullptr || tensor_rows(file, "blk.0.ffn_up.weight") == 2 * info.ff_dim;
    info.ffn = gated ? EncoderFfn::gelu_gated : EncoderFfn::gelu;
  } else if (info.arch == "modern-bert") {
    // Pre-norm blocks without biases; rope at a global and a local base; every third layer (from the
    // first) global, the rest within the symmetric window; a GEGLU FFN (SwiGLU for derivatives whose
    // hidden_activation says so); a final norm.
    info.block = EncoderBlock::pre_norm;
    info.norm_bias = false;
    read_rope(file, a, info);
    if (file.find(a + "attention.sliding_window") != nullptr) info.window = uint32_t(required_uint(file, a + "attention.sliding_window", 0, 1 << 20));
    if (info.window > 0) info.layer_local = local_layers(file, a, info.n_layers, 3, /*dense_first=*/true);
    const std::string act = file.get_string(a + "hidden_activation").value_or("gelu");
    if (act != "gelu" && act != "geglu" && act != "silu" && act != "swiglu")
      throw Error(file.label() + ": " + a + "hidden_activation '" + act + "' is not supported (gelu, geglu, silu, swiglu)");
    info.ffn = act == "silu" || act == "swiglu" ? EncoderFfn::silu_gated : EncoderFfn::gelu_gated;
  } else if (gemma) {
    // Gemma 3 blocks with bidirectional attention: RMS norms around both halves, per-head q/k norms,
    // the embedding scaled by sqrt(dim), q scaled by 1/sqrt(head size), local layers (five of each six)
    // within the symmetric window at the local rope base, a GELU-gated FFN.
    info.block = EncoderBlock::sandwich;
    info.rms_norm = info.qk_norm = true;
    read_rope(file, a, info);
    info.window = uint32_t(required_uint(file, a + "attention.sliding_window", 1, 1 << 20));
    info.layer_local = local_layers(file, a, info.n_layers, 6, /*dense_first=*/false);
    info.embed_scale = std::sqrt(float(info.dim));
    info.attn_scale = 1.0f / std::sqrt(float(info.head_dim));
    info.ffn = EncoderFfn::gelu_gated;
  }
  if (file.get_bool(a + "attention.causal").value_or(false))
    throw Error(file.label() + ": a causal encoder (" + a + "attention.causal) is not supported; Loom runs " + info.arch + " with bidirectional attention");
  const uint64_t pooling = file.get_uint(a + "pooling_type").value_or(1);
  if (pooling < 1 || pooling > 4)
    throw Error(file.label() + ": " + a + "pooling_type " + std::to_string(pooling) + " is not supported (1 mean, 2 cls, 3 last, 4 rank)");
  info.pooling = Pooling(pooling);
  if (info.pooling == Pooling::rank) {
    if (info.arch != "bert" && info.arch != "nomic-bert" && info.arch != "modern-bert")
      throw Error(file.label() + ": a " + info.arch + " reranker (rank pooling) is not supported yet (bert, nomic-bert and modern-bert rerankers are)");
    // What the heads see: the first row, or (modern-bert's default, gte-reranker-modernbert) the mean.
    const uint64_t cls_pooling = file.get_uint(a + "classifier.pooling_type").value_or(info.arch == "modern-bert" ? 1 : 2);
    if (cls_pooling != 1 && cls_pooling != 2)
      throw Error(file.label() + ": " + a + "classifier.pooling_type " + std::to_string(cls_pooling) + " is not supported (1 mean, 2 cls)");
    info.classifier_pooling = Pooling(cls_pooling);
    const gguf::TensorInfo* out = file.find_tensor("cls.output.weight");
    if (out == nullptr || out->dims.size() != 2 || out->dims[0] != info.dim || out->dims[1] < 1)
      throw Error(file.label() + ": a reranker (" + a + "pooling_type 4) needs tensor 'cls.output.weight' [" + std::to_string(info.dim) + ", labels]");
    info.n_cls_out = out->dims[1];
  }
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2 || embd->dims[0] != info.dim)
    throw Error(file.label() + ": tensor 'token_embd.weight' is missing or not [" + std::to_string(info.dim) + ", n_vocab]");
  info.n_vocab = embd->dims[1];
  info.pooled_dim = info.dim;
  return info;
}

}  // namespace loom::embed
