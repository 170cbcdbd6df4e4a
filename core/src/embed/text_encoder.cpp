#include "embed/text_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"

namespace loom::embed {

namespace {

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

uint64_t required_uint(const gguf::GgufFile& file, const std::string& key, uint64_t lo, uint64_t hi) {
  const auto v = file.get_uint(key);
  if (!v) throw Error(file.label() + ": metadata '" + key + "' is missing");
  if (*v < lo || *v > hi)
    throw Error(file.label() + ": metadata '" + key + "' is " + std::to_string(*v) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return *v;
}

}  // namespace

const char* pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::none: return "none";
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
    case Pooling::rank: return "rank";
  }
  return "?";
}

bool is_text_encoder(const gguf::GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  return arch == "bert" || arch == "nomic-bert";
}

TextEncoderInfo read_text_encoder_info(const gguf::GgufFile& file) {
  TextEncoderInfo info;
  info.arch = file.get_string("general.architecture").value_or("");
  if (info.arch != "bert" && info.arch != "nomic-bert")
    throw Error(file.label() + ": architecture '" + info.arch + "' is not a text encoder Loom runs (bert, nomic-bert)");
  info.name = file.get_string("general.name").value_or("");
  const std::string a = info.arch + ".";
  info.dim = int64_t(required_uint(file, a + "embedding_length", 1, 65536));
  info.n_layers = int64_t(required_uint(file, a + "block_count", 1, 512));
  info.n_heads = int64_t(required_uint(file, a + "attention.head_count", 1, 1024));
  info.ff_dim = int64_t(required_uint(file, a + "feed_forward_length", 1, 1 << 20));
  info.n_ctx_train = int64_t(required_uint(file, a + "context_length", 1, 1 << 20));
  if (info.dim % info.n_heads != 0)
    throw Error(file.label() + ": embedding_length " + std::to_string(info.dim) + " is not a multiple of head_count " + std::to_string(info.n_heads));
  info.head_dim = info.dim / info.n_heads;
  info.eps = float(file.get_float(a + "attention.layer_norm_epsilon").value_or(1e-12));
  if (info.arch == "nomic-bert") {
    info.rope = info.ffn_gated = true;
    info.n_rot = int64_t(file.get_uint(a + "rope.dimension_count").value_or(uint64_t(info.head_dim)));
    if (info.n_rot < 2 || info.n_rot > info.head_dim || info.n_rot % 2 != 0)
      throw Error(file.label() + ": " + a + "rope.dimension_count " + std::to_string(info.n_rot) + " must be even and at most the head size " +
                  std::to_string(info.head_dim));
    info.rope_base = float(file.get_float(a + "rope.freq_base").value_or(10000.0));
  }
  if (file.get_bool(a + "attention.causal").value_or(false))
    throw Error(file.label() + ": a causal bert (" + a + "attention.causal) is not supported; Loom runs bert with bidirectional attention");
  const uint64_t pooling = file.get_uint(a + "pooling_type").value_or(1);
  if (pooling < 1 || pooling > 4)
    throw Error(file.label() + ": " + a + "pooling_type " + std::to_string(pooling) + " is not supported (1 mean, 2 cls, 3 last, 4 rank)");
  info.pooling = Pooling(pooling);
  if (info.pooling == Pooling::rank) {
    const gguf::TensorInfo* out = file.find_tensor("cls.output.weight");
    if (out == nullptr || out->dims.size() != 2 || out->dims[0] != info.dim || out->dims[1] < 1)
      throw Error(file.label() + ": a reranker (" + a + "pooling_type 4) needs tensor 'cls.output.weight' [" + std::to_string(info.dim) + ", labels]");
    info.n_cls_out = out->dims[1];
  }
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2 || embd->dims[0] != info.dim)
    throw Error(file.label() + ": tensor 'token_embd.weight' is missing or not [" + std::to_string(info.dim) + ", n_vocab]");
  info.n_vocab = embd->dims[1];
  return info;
}

TextEncoder::TextEncoder(TextEncoderInfo info, Backend& backend, int64_t max_tokens)
    : info_(std::move(info)), backend_(backend), max_tokens_(max_tokens) {}
TextEncoder::~TextEncoder() = default;

std::unique_ptr<TextEncoder> TextEncoder::load(const gguf::GgufFile& file, Backend& backend, int64_t max_tokens) {
  if (max_tokens < 1) throw Error("text encoder: max_tokens must be positive");
  std::unique_ptr<TextEncoder> encoder(new TextEncoder(read_text_encoder_info(file), backend, max_tokens));
  encoder->load_weights(file);
  const TextEncoderInfo& m = encoder->info_;
  const auto c = uint64_t(m.dim), n = uint64_t(max_tokens);
  uint64_t offset = 0;
  auto reserve = [&](uint64_t words) {
    const uint64_t at = offset;
    offset = align_up(offset + words * 4, 256);
    return at;
  };
  Scratch& s = encoder->at_;
  s.tokens = reserve(n), s.positions = reserve(n), s.seqs = reserve(2 * n);
  s.x = reserve(c * n), s.h = reserve(c * n), s.q = reserve(c * n), s.k = reserve(c * n), s.v = reserve(c * n), s.a = reserve(c * n);
  s.ffn = reserve(uint64_t(m.ff_dim) * n);
  s.ffn_up = reserve(m.ffn_gated ? uint64_t(m.ff_dim) * n : 0);
  encoder->compute_ = backend.alloc(offset, LOOM_BUFFER_USAGE_COMPUTE);
  // Every op of a one-input batch asked once, so a backend without the encoder ops is refused at load.
  encoder->build_ops(1, 1);
  for (const loom_op& op : encoder->ops_) {
    const std::string reason = backend.unsupported_reason(op);
    if (!reason.empty()) throw Error(file.label() + ": backend '" + backend.name() + "' cannot run this text encoder: " + reason);
  }
  return encoder;
}

void TextEncoder::load_weights(const gguf::GgufFile& file) {
  const TextEncoderInfo& m = info_;
  // Matrices stay in their file type (the backend must take it); vectors and the position and type
  // tables become F32, as the ops read them.
  struct Planned {
    const gguf::TensorInfo* source;
    loom_tensor* target;
    loom_dtype dtype;
    uint64_t offset, bytes;
  };
  std::vector<Planned> plan;
  uint64_t total = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> dims, loom_tensor* target, bool matrix, bool optional = false) {
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) {
      if (!optional) throw Error(file.label() + ": tensor '" + name + "' is missing (required by " + m.arch + ")");
      *target = no_tensor();
      return;
    }
    if (t->dims != dims) throw Error(file.label() + ": tensor '" + name + "' has shape " + shape_text(t->dims) + ", expected " + shape_text(dims));
    if (dtype_traits(t->type) == nullptr) throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) + ", which Loom cannot read");
    const loom_dtype dtype = matrix ? t->type : LOOM_DTYPE_F32;
    if (matrix && dtype != LOOM_DTYPE_F32 && !backend_.supports_weight_dtype(dtype))
      throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(dtype) + ", which backend '" + backend_.name() + "' does not support");
    uint64_t rows = 1;
    for (size_t i = 1; i < dims.size(); i++) rows *= uint64_t(dims[i]);
    const uint64_t bytes = dtype_row_bytes(dtype, dims[0]) * rows;
    plan.push_back({t, target, dtype, total, bytes});
    total = align_up(total + bytes, 256);
  };
  const int64_t c = m.dim, ff = m.ff_dim;
  add("token_embd.weight", {c, m.n_vocab}, &tok_embd_, true);
  loom_tensor types{};
  add("token_types.weight", {c, 2}, &types, false, /*optional=*/true);
  if (!m.rope) add("position_embd.weight", {c, m.n_ctx_train}, &pos_embd_, false);
  add("token_embd_norm.weight", {c}, &tok_norm_w_, false);
  add("token_embd_norm.bias", {c}, &tok_norm_b_, false);
  layers_.resize(size_t(m.n_layers));
  for (int64_t il = 0; il < m.n_layers; il++) {
    LayerWeights& l = layers_[size_t(il)];
    const std::string b = "blk." + std::to_string(il) + ".";
    if (file.find_tensor(b + "attn_qkv.weight") != nullptr) {  // split into row ranges after the upload
      add(b + "attn_qkv.weight", {c, 3 * c}, &l.qkv, true);
      add(b + "attn_qkv.bias", {3 * c}, &l.qkv_b, false, true);
    } else {
      add(b + "attn_q.weight", {c, c}, &l.wq, true);
      add(b + "attn_q.bias", {c}, &l.bq, false, true);
      add(b + "attn_k.weight", {c, c}, &l.wk, true);
      add(b + "attn_k.bias", {c}, &l.bk, false, true);
      add(b + "attn_v.weight", {c, c}, &l.wv, true);
      add(b + "attn_v.bias", {c}, &l.bv, false, true);
    }
    add(b + "attn_output.weight", {c, c}, &l.wo, true);
    add(b + "attn_output.bias", {c}, &l.bo, false, true);
    add(b + "attn_output_norm.weight", {c}, &l.ln1_w, false);
    add(b + "attn_output_norm.bias", {c}, &l.ln1_b, false);
    if (m.ffn_gated) {  // llama.cpp's nomic-bert reads no FFN biases
      add(b + "ffn_gate.weight", {c, ff}, &l.gate, true);
      add(b + "ffn_up.weight", {c, ff}, &l.up, true);
      add(b + "ffn_down.weight", {ff, c}, &l.down, true);
      l.up_b = l.down_b = no_tensor();
    } else {
      add(b + "ffn_up.weight", {c, ff}, &l.up, true);
      add(b + "ffn_up.bias", {ff}, &l.up_b, false, true);
      add(b + "ffn_down.weight", {ff, c}, &l.down, true);
      add(b + "ffn_down.bias", {c}, &l.down_b, false, true);
    }
    add(b + "layer_output_norm.weight", {c}, &l.ln2_w, false);
    add(b + "layer_output_norm.bias", {c}, &l.ln2_b, false);
  }
  weights_ = backend_.alloc(std::max<uint64_t>(total, 256), LOOM_BUFFER_USAGE_WEIGHTS);
  for (const Planned& t : plan) {
    const std::span<const uint8_t> data = file.tensor_data(*t.source);
    std::vector<uint8_t> converted;
    std::span<const uint8_t> bytes = data;
    if (t.dtype != t.source->type) {
      const std::vector<float> values = dequantize_rows(t.source->type, data, t.source->n_elements);
      converted.resize(values.size() * 4);
      std::memcpy(converted.data(), values.data(), converted.size());
      bytes = converted;
    }
    if (bytes.size() != t.bytes) throw Error(file.label() + ": tensor '" + t.source->name + "' converted to an unexpected size");
    const auto& d = t.source->dims;
    *t.target = tensor_view(weights_, t.offset, t.dtype, d[0], int64_t(t.source->n_elements) / d[0]);
    backend_.upload(weights_, t.offset, bytes.data(), t.bytes);
    backend_.synchronize();  // `converted` is reused
  }
  // llama.cpp adds token type 0's row to every token (single-segment inputs).
  type_row_ = types.buffer != nullptr ? row_range(types, 0, 1) : no_tensor();
  for (LayerWeights& l : layers_) {  // a fused q, k, v: rows (and bias values) in that order
    if (l.qkv.buffer == nullptr) continue;
    l.wq = row_range(l.qkv, 0, c), l.wk = row_range(l.qkv, c, c), l.wv = row_range(l.qkv, 2 * c, c);
    l.bq = l.bk = l.bv = no_tensor();
    if (l.qkv_b.buffer == nullptr) continue;
    loom_tensor* parts[3] = {&l.bq, &l.bk, &l.bv};
    for (int i = 0; i < 3; i++) *parts[i] = tensor_view(weights_, l.qkv_b.offset + uint64_t(i * c) * 4, LOOM_DTYPE_F32, c);
  }
  if (m.pooling == Pooling::rank) {
    auto host = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float>& out, bool optional) {
      const gguf::TensorInfo* t = file.find_tensor(name);
      if (t == nullptr) {
        if (!optional) throw Error(file.label() + ": tensor '" + name + "' is missing (required by a reranker)");
        return;
      }
      if (t->dims != dims) throw Error(file.label() + ": tensor '" + name + "' has shape " + shape_text(t->dims) + ", expected " + shape_text(dims));
      if (dtype_traits(t->type) == nullptr) throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) + ", which Loom cannot read");
      out = dequantize_rows(t->type, file.tensor_data(*t), t->n_elements);
    };
    host("cls.weight", {c, c}, cls_, true);
    if (!cls_.empty()) host("cls.bias", {c}, cls_b_, true);
    host("cls.output.weight", {c, m.n_cls_out}, cls_out_, false);
    host("cls.output.bias", {m.n_cls_out}, cls_out_b_, true);
  }
}

std::vector<float> TextEncoder::classify(const float* row) const {
  const auto c = size_t(info_.dim);
  std::vector<double> h(row, row + c);
  if (!cls_.empty()) {  // the pooler: tanh(W x + b)
    std::vector<double> dense(c);
    for (size_t o = 0; o < c; o++) {
      double sum = cls_b_.empty() ? 0.0 : cls_b_[o];
      for (size_t i = 0; i < c; i++) sum += double(cls_[o * c + i]) * row[i];
      dense[o] = std::tanh(sum);
    }
    h = dense;
  }
  std::vector<float> scores(size_t(info_.n_cls_out));
  for (size_t o = 0; o < scores.size(); o++) {
    double sum = cls_out_b_.empty() ? 0.0 : cls_out_b_[o];
    for (size_t i = 0; i < c; i++) sum += double(cls_out_[o * c + i]) * h[i];
    scores[o] = float(sum);
  }
  return scores;
}

void TextEncoder::build_ops(int64_t n, int64_t n_seqs) {
  const TextEncoderInfo& m = info_;
  const int64_t c = m.dim, d = m.head_dim;
  norm_ = {sizeof(loom_norm_params), m.eps};
  attn_ = {sizeof(loom_encoder_attention_params), 1.0f / std::sqrt(float(d)), 0, 0};
  gelu_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_GELU_TANH};  // llama.cpp's bert runs ggml_gelu
  silu_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_SILU};
  rope_ = {sizeof(loom_rope_params), LOOM_ROPE_NEOX, uint32_t(m.n_rot), m.rope_base, 1.0f, 0.0f, {0.0f, 0.0f}, {0, 0, 0, 0}};
  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) { return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2); };
  ops_.clear();
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs, const void* params = nullptr) {
    ops_.push_back(make_op(type, dst, srcs, params));
  };
  auto linear = [&](const loom_tensor& dst, const loom_tensor& w, const loom_tensor& bias, const loom_tensor& x) {
    op(LOOM_OP_MATMUL, dst, {w, x});
    if (bias.buffer != nullptr) op(LOOM_OP_ADD, dst, {dst, bias});
  };
  const loom_tensor x = f32(at_.x, c, n), h = f32(at_.h, c, n), q = f32(at_.q, c, n), k = f32(at_.k, c, n), v = f32(at_.v, c, n);
  const loom_tensor a = f32(at_.a, c, n), ffn = f32(at_.ffn, m.ff_dim, n);
  auto heads = [&](const loom_tensor& t) { return reshape(t, d, m.n_heads, n); };
  op(LOOM_OP_GET_ROWS, x, {tok_embd_, tensor_view(compute_, at_.tokens, LOOM_DTYPE_I32, n)});
  if (type_row_.buffer != nullptr) op(LOOM_OP_ADD, x, {x, type_row_});
  const loom_tensor positions = tensor_view(compute_, at_.positions, LOOM_DTYPE_I32, n);
  if (!m.rope) {
    op(LOOM_OP_GET_ROWS, h, {pos_embd_, positions});
    op(LOOM_OP_ADD, x, {x, h});
  }
  op(LOOM_OP_LAYER_NORM, x, {x, tok_norm_w_, tok_norm_b_}, &norm_);
  const loom_tensor seqs = tensor_view(compute_, at_.seqs, LOOM_DTYPE_I32, 2, n_seqs);
  for (const LayerWeights& l : layers_) {
    linear(q, l.wq, l.bq, x);
    linear(k, l.wk, l.bk, x);
    linear(v, l.wv, l.bv, x);
    if (m.rope) {
      op(LOOM_OP_ROPE, heads(q), {heads(q), positions}, &rope_);
      op(LOOM_OP_ROPE, heads(k), {heads(k), positions}, &rope_);
    }
    op(LOOM_OP_ATTENTION, heads(a), {heads(q), heads(k), heads(v), seqs}, &attn_);
    linear(h, l.wo, l.bo, a);
    op(LOOM_OP_ADD, h, {h, x});
    op(LOOM_OP_LAYER_NORM, x, {h, l.ln1_w, l.ln1_b}, &norm_);
    if (m.ffn_gated) {
      const loom_tensor up = f32(at_.ffn_up, m.ff_dim, n);
      op(LOOM_OP_MATMUL, ffn, {l.gate, x});
      op(LOOM_OP_MATMUL, up, {l.up, x});
      op(LOOM_OP_GLU, ffn, {ffn, up}, &silu_);
    } else {
      linear(ffn, l.up, l.up_b, x);
      op(LOOM_OP_UNARY, ffn, {ffn}, &gelu_);
    }
    linear(h, l.down, l.down_b, ffn);
    op(LOOM_OP_ADD, h, {h, x});
    op(LOOM_OP_LAYER_NORM, x, {h, l.ln2_w, l.ln2_b}, &norm_);
  }
  ops_tok_ = n;
  ops_seqs_ = n_seqs;
}

std::vector<float> TextEncoder::run_batch(const std::vector<const std::vector<int32_t>*>& batch) {
  std::vector<int32_t> tokens, positions, seqs;
  for (const std::vector<int32_t>* input : batch) {
    seqs.insert(seqs.end(), {int32_t(tokens.size()), int32_t(input->size())});
    for (size_t i = 0; i < input->size(); i++) {
      tokens.push_back((*input)[i]);
      positions.push_back(int32_t(i));
    }
  }
  const auto n = int64_t(tokens.size()), n_seqs = int64_t(batch.size());
  if (n != ops_tok_ || n_seqs != ops_seqs_) build_ops(n, n_seqs);
  backend_.upload(compute_, at_.tokens, tokens.data(), tokens.size() * 4);
  backend_.upload(compute_, at_.positions, positions.data(), positions.size() * 4);
  backend_.upload(compute_, at_.seqs, seqs.data(), seqs.size() * 4);
  backend_.run(ops_);
  std::vector<float> rows(size_t(n * info_.dim));
  backend_.download(rows.data(), compute_, at_.x, rows.size() * 4);
  backend_.synchronize();
  return rows;
}

std::vector<std::vector<float>> TextEncoder::embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) {
  const TextEncoderInfo& m = info_;
  check_inputs(inputs, std::min(m.n_ctx_train, max_tokens_), m.n_ctx_train <= max_tokens_ ? " (its context)" : " (max_tokens)", m.n_vocab);
  std::vector<std::vector<float>> out(inputs.size());
  const auto c = size_t(m.dim);
  size_t next = 0;
  while (next < inputs.size()) {
    // As many whole inputs as fit one batch, in order.
    std::vector<const std::vector<int32_t>*> batch;
    int64_t rows = 0;
    const size_t first = next;
    while (next < inputs.size() && rows + int64_t(inputs[next].size()) <= max_tokens_) {
      rows += int64_t(inputs[next].size());
      batch.push_back(&inputs[next++]);
    }
    const std::vector<float> hidden = run_batch(batch);
    size_t row = 0;
    for (size_t b = 0; b < batch.size(); b++) {
      const size_t count = batch[b]->size();
      if (m.pooling == Pooling::rank) {  // the first row ([CLS]) through the heads
        out[first + b] = classify(&hidden[row * c]);
        row += count;
        continue;
      }
      // The mean of its rows, or its first or last row.
      const size_t pick = m.pooling == Pooling::mean || m.pooling == Pooling::cls ? row : row + count - 1;
      out[first + b] = pool_rows(&hidden[pick * c], m.pooling == Pooling::mean ? count : 1, c, normalize);
      row += count;
    }
  }
  return out;
}

}  // namespace loom::embed
