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

TextEncoder::TextEncoder(TextEncoderInfo info, Backend& backend, int64_t max_tokens)
    : info_(std::move(info)), backend_(backend), max_tokens_(max_tokens) {}
TextEncoder::~TextEncoder() = default;

std::unique_ptr<TextEncoder> TextEncoder::load(const gguf::GgufFile& file, Backend& backend, int64_t max_tokens) {
  if (max_tokens < 1) throw Error("text encoder: max_tokens must be positive");
  std::unique_ptr<TextEncoder> encoder(new TextEncoder(read_text_encoder_info(file), backend, max_tokens));
  const TextEncoderInfo& m = encoder->info_;
  // A backend built before ABI 1.14 would not read the window or ALiBi fields and attend to everything.
  if (m.needs_abi_1_14() && backend.abi_minor() < 14)
    throw Error(file.label() + ": " + m.arch + " needs ATTENTION's window or ALiBi (ABI 1.14); backend '" + backend.name() + "' speaks ABI 1." +
                std::to_string(backend.abi_minor()));
  encoder->load_weights(file);
  encoder->load_host_tensors(file);
  const auto c = uint64_t(std::max(m.dim, m.n_heads * m.head_dim)), n = uint64_t(max_tokens);
  uint64_t offset = 0;
  auto reserve = [&](uint64_t words) {
    const uint64_t at = offset;
    offset = align_up(offset + words * 4, 256);
    return at;
  };
  Scratch& s = encoder->at_;
  s.tokens = reserve(n), s.positions = reserve(n), s.seqs = reserve(2 * n);
  s.x = reserve(c * n), s.h = reserve(c * n), s.n = reserve(c * n), s.q = reserve(c * n), s.k = reserve(c * n), s.v = reserve(c * n);
  s.a = reserve(c * n);
  s.ffn = reserve(uint64_t(m.ff_dim) * n);
  s.ffn_up = reserve(m.ffn != EncoderFfn::gelu ? uint64_t(m.ff_dim) * n : 0);
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
  const int64_t c = m.dim, ff = m.ff_dim, qd = m.n_heads * m.head_dim, kvd = m.n_kv_heads * m.head_dim;
  const bool post_norm = m.block == EncoderBlock::post_norm;
  add("token_embd.weight", {c, m.n_vocab}, &tok_embd_, true);
  loom_tensor types{};
  // BERT has two token types, XLM-RoBERTa one (its table [c]); only the first row is ever read.
  const gguf::TensorInfo* type_table = file.find_tensor("token_types.weight");
  const bool one_type = type_table != nullptr && type_table->dims == std::vector<int64_t>{c};
  add("token_types.weight", one_type ? std::vector<int64_t>{c} : std::vector<int64_t>{c, 2}, &types, false, /*optional=*/true);
  if (m.positions == EncoderPositions::table) add("position_embd.weight", {c, m.n_ctx_train}, &pos_embd_, false);
  if (m.block != EncoderBlock::sandwich) {
    add("token_embd_norm.weight", {c}, &tok_norm_w_, false);
    add("token_embd_norm.bias", {c}, &tok_norm_b_, false, !m.norm_bias);
  }
  if (!post_norm) add("output_norm.weight", {c}, &out_norm_, false);
  layers_.resize(size_t(m.n_layers));
  for (int64_t il = 0; il < m.n_layers; il++) {
    LayerWeights& l = layers_[size_t(il)];
    const std::string b = "blk." + std::to_string(il) + ".";
    if (file.find_tensor(b + "attn_qkv.weight") != nullptr) {  // split into row ranges after the upload
      add(b + "attn_qkv.weight", {c, qd + 2 * kvd}, &l.qkv, true);
      add(b + "attn_qkv.bias", {qd + 2 * kvd}, &l.qkv_b, false, true);
    } else {
      add(b + "attn_q.weight", {c, qd}, &l.wq, true);
      add(b + "attn_q.bias", {qd}, &l.bq, false, true);
      add(b + "attn_k.weight", {c, kvd}, &l.wk, true);
      add(b + "attn_k.bias", {kvd}, &l.bk, false, true);
      add(b + "attn_v.weight", {c, kvd}, &l.wv, true);
      add(b + "attn_v.bias", {kvd}, &l.bv, false, true);
    }
    add(b + "attn_output.weight", {qd, c}, &l.wo, true);
    add(b + "attn_output.bias", {c}, &l.bo, false, true);
    // ln1: after the attention (post-norm) or before it; ln2: after the FFN (post-norm) or before it.
    // modern-bert's layer 0 has no attention norm (identity).
    add(b + (post_norm ? "attn_output_norm.weight" : "attn_norm.weight"), {c}, &l.ln1_w, false, m.block == EncoderBlock::pre_norm && il == 0);
    add(b + (post_norm ? "attn_output_norm.bias" : "attn_norm.bias"), {c}, &l.ln1_b, false, !(post_norm && m.norm_bias));
    add(b + (post_norm ? "layer_output_norm.weight" : "ffn_norm.weight"), {c}, &l.ln2_w, false);
    add(b + (post_norm ? "layer_output_norm.bias" : "ffn_norm.bias"), {c}, &l.ln2_b, false, !(post_norm && m.norm_bias));
    if (m.qk_norm) {
      add(b + "attn_q_norm.weight", {m.head_dim}, &l.q_norm, false);
      add(b + "attn_k_norm.weight", {m.head_dim}, &l.k_norm, false);
    } else {  // jina-bert-v2 (some): layer norms over the whole q and k, and a second norm after attention
      add(b + "attn_q_norm.weight", {qd}, &l.q_ln_w, false, true);
      add(b + "attn_q_norm.bias", {qd}, &l.q_ln_b, false, true);
      add(b + "attn_k_norm.weight", {kvd}, &l.k_ln_w, false, true);
      add(b + "attn_k_norm.bias", {kvd}, &l.k_ln_b, false, true);
      add(b + "attn_norm_2.weight", {c}, &l.ln1b_w, false, true);
      add(b + "attn_norm_2.bias", {c}, &l.ln1b_b, false, true);
    }
    if (m.block == EncoderBlock::sandwich) {
      add(b + "post_attention_norm.weight", {c}, &l.post1, false);
      add(b + "post_ffw_norm.weight", {c}, &l.post2, false);
    }
    if (m.ffn == EncoderFfn::gelu) {
      add(b + "ffn_up.weight", {c, ff}, &l.up, true);
      add(b + "ffn_up.bias", {ff}, &l.up_b, false, true);
    } else if (file.find_tensor(b + "ffn_gate.weight") != nullptr) {
      add(b + "ffn_gate.weight", {c, ff}, &l.gate, true);
      add(b + "ffn_up.weight", {c, ff}, &l.up, true);
      add(b + "ffn_up.bias", {ff}, &l.up_b, false, true);
    } else {  // the gate is the first half of ffn_up's rows (GEGLU), split after the upload
      add(b + "ffn_up.weight", {c, 2 * ff}, &l.up, true);
      add(b + "ffn_up.bias", {2 * ff}, &l.up_b, false, true);
    }
    add(b + "ffn_down.weight", {ff, c}, &l.down, true);
    add(b + "ffn_down.bias", {c}, &l.down_b, false, true);
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
  auto bias_part = [&](const loom_tensor& bias, int64_t first, int64_t count) {
    return tensor_view(weights_, bias.offset + uint64_t(first) * 4, LOOM_DTYPE_F32, count);
  };
  for (LayerWeights& l : layers_) {
    if (l.qkv.buffer != nullptr) {  // a fused q, k, v: rows (and bias values) in that order
      l.wq = row_range(l.qkv, 0, qd), l.wk = row_range(l.qkv, qd, kvd), l.wv = row_range(l.qkv, qd + kvd, kvd);
      l.bq = l.bk = l.bv = no_tensor();
      if (l.qkv_b.buffer != nullptr) l.bq = bias_part(l.qkv_b, 0, qd), l.bk = bias_part(l.qkv_b, qd, kvd), l.bv = bias_part(l.qkv_b, qd + kvd, kvd);
    }
    if (m.ffn != EncoderFfn::gelu && l.gate.buffer == nullptr) {  // GEGLU: gate rows first, then up rows
      const loom_tensor fused = l.up, fused_b = l.up_b;
      l.gate = row_range(fused, 0, ff), l.up = row_range(fused, ff, ff);
      l.gate_b = fused_b.buffer != nullptr ? bias_part(fused_b, 0, ff) : no_tensor();
      l.up_b = fused_b.buffer != nullptr ? bias_part(fused_b, ff, ff) : no_tensor();
    }
  }
}

void TextEncoder::load_host_tensors(const gguf::GgufFile& file) {
  const TextEncoderInfo& m = info_;
  const int64_t c = m.dim;
  auto host = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float>& out, bool optional) {
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) {
      if (!optional) throw Error(file.label() + ": tensor '" + name + "' is missing (required by a reranker)");
      return false;
    }
    if (t->dims != dims) throw Error(file.label() + ": tensor '" + name + "' has shape " + shape_text(t->dims) + ", expected " + shape_text(dims));
    if (dtype_traits(t->type) == nullptr) throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) + ", which Loom cannot read");
    out = dequantize_rows(t->type, file.tensor_data(*t), t->n_elements);
    return true;
  };
  if (m.pooling == Pooling::rank) {
    host("cls.weight", {c, c}, cls_, true);
    if (!cls_.empty()) host("cls.bias", {c}, cls_b_, true);
    if (!cls_.empty()) host("cls.norm.weight", {c}, cls_norm_, true);
    host("cls.output.weight", {c, m.n_cls_out}, cls_out_, false);
    host("cls.output.bias", {m.n_cls_out}, cls_out_b_, true);
  }
  // EmbeddingGemma converted with its sentence-transformers modules: dense_2 [dim -> n], dense_3 [n -> dim].
  int64_t width = c;
  for (const char* name : {"dense_2", "dense_3"}) {
    const gguf::TensorInfo* t = file.find_tensor(std::string(name) + ".weight");
    if (t == nullptr) continue;
    if (t->dims.size() != 2 || t->dims[0] != width)
      throw Error(file.label() + ": tensor '" + std::string(name) + ".weight' has shape " + shape_text(t->dims) + ", expected [" + std::to_string(width) + ", n]");
    Dense d;
    d.n_in = width, d.n_out = t->dims[1];
    host(std::string(name) + ".weight", t->dims, d.w, false);
    host(std::string(name) + ".bias", {d.n_out}, d.b, true);
    width = d.n_out;
    dense_.push_back(std::move(d));
  }
  info_.pooled_dim = width;
}

std::vector<float> TextEncoder::project(const std::vector<float>& pooled) const {
  std::vector<float> x = pooled;
  for (const Dense& d : dense_) {
    std::vector<float> y(size_t(d.n_out));
    for (int64_t o = 0; o < d.n_out; o++) {
      double sum = d.b.empty() ? 0.0 : d.b[size_t(o)];
      const float* w = &d.w[size_t(o * d.n_in)];
      for (int64_t i = 0; i < d.n_in; i++) sum += double(w[i]) * x[size_t(i)];
      y[size_t(o)] = float(sum);
    }
    x = std::move(y);
  }
  return x;
}

std::vector<float> TextEncoder::classify(const float* row) const {
  const auto c = size_t(info_.dim);
  std::vector<double> h(row, row + c);
  if (!cls_.empty()) {  // the pooler: tanh(W x + b); modern-bert's: a layer norm of gelu(W x + b)
    std::vector<double> dense(c);
    const bool modern = info_.arch == "modern-bert";
    for (size_t o = 0; o < c; o++) {
      double sum = cls_b_.empty() ? 0.0 : cls_b_[o];
      for (size_t i = 0; i < c; i++) sum += double(cls_[o * c + i]) * row[i];
      dense[o] = modern ? 0.5 * sum * (1.0 + std::tanh(0.7978845608028654 * (sum + 0.044715 * sum * sum * sum))) : std::tanh(sum);
    }
    if (!cls_norm_.empty()) {
      double mean = 0.0, var = 0.0;
      for (double v : dense) mean += v;
      mean /= double(c);
      for (double v : dense) var += (v - mean) * (v - mean);
      const double inv = 1.0 / std::sqrt(var / double(c) + double(info_.eps));
      for (size_t i = 0; i < c; i++) dense[i] = (dense[i] - mean) * inv * cls_norm_[i];
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
  const int64_t c = m.dim, d = m.head_dim, qd = m.n_heads * d, kvd = m.n_kv_heads * d;
  norm_ = {sizeof(loom_norm_params), m.eps};
  const float scale = m.attn_scale != 0.0f ? m.attn_scale : 1.0f / std::sqrt(float(d));
  attn_global_ = {sizeof(loom_encoder_attention_params), scale, 0, 0, 0, m.alibi_max_bias};
  attn_local_ = attn_global_;
  attn_local_.window = m.window;
  gelu_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_GELU_TANH};  // llama.cpp's encoders run ggml_gelu
  silu_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_SILU};
  rope_global_ = {sizeof(loom_rope_params), LOOM_ROPE_NEOX, uint32_t(m.n_rot), m.rope_base, m.rope_scale, 0.0f, {0.0f, 0.0f}, {0, 0, 0, 0}};
  rope_local_ = rope_global_;
  rope_local_.freq_base = m.rope_base_local, rope_local_.freq_scale = 1.0f;
  embed_scale_ = {sizeof(loom_scale_params), m.embed_scale};
  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) { return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2); };
  ops_.clear();
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs, const void* params = nullptr) {
    ops_.push_back(make_op(type, dst, srcs, params));
  };
  auto linear = [&](const loom_tensor& dst, const loom_tensor& w, const loom_tensor& bias, const loom_tensor& x) {
    op(LOOM_OP_MATMUL, dst, {w, x});
    if (bias.buffer != nullptr) op(LOOM_OP_ADD, dst, {dst, bias});
  };
  auto norm = [&](const loom_tensor& dst, const loom_tensor& x, const loom_tensor& w, const loom_tensor& b) {
    if (m.rms_norm) op(LOOM_OP_RMS_NORM, dst, {x, w}, &norm_);
    else op(LOOM_OP_LAYER_NORM, dst, {x, w, b}, &norm_);
  };
  // x the residual stream, h a block's output, nx a normed copy of x (pre-norm and sandwich blocks).
  const loom_tensor x = f32(at_.x, c, n), h = f32(at_.h, c, n), nx = f32(at_.n, c, n);
  const loom_tensor q = f32(at_.q, qd, n), k = f32(at_.k, kvd, n), v = f32(at_.v, kvd, n), a = f32(at_.a, qd, n);
  const loom_tensor ffn = f32(at_.ffn, m.ff_dim, n), up = f32(at_.ffn_up, m.ff_dim, n);
  auto heads = [&](const loom_tensor& t, int64_t n_heads) { return reshape(t, d, n_heads, n); };
  auto feed_forward = [&](const LayerWeights& l, const loom_tensor& in) {  // into h
    if (m.ffn == EncoderFfn::gelu) {
      linear(ffn, l.up, l.up_b, in);
      op(LOOM_OP_UNARY, ffn, {ffn}, &gelu_);
    } else {
      linear(ffn, l.gate, l.gate_b, in);
      linear(up, l.up, l.up_b, in);
      op(LOOM_OP_GLU, ffn, {ffn, up}, m.ffn == EncoderFfn::silu_gated ? &silu_ : &gelu_);
    }
    linear(h, l.down, l.down_b, ffn);
  };
  op(LOOM_OP_GET_ROWS, x, {tok_embd_, tensor_view(compute_, at_.tokens, LOOM_DTYPE_I32, n)});
  if (m.embed_scale != 1.0f) op(LOOM_OP_SCALE, x, {x}, &embed_scale_);
  if (type_row_.buffer != nullptr) op(LOOM_OP_ADD, x, {x, type_row_});
  const loom_tensor positions = tensor_view(compute_, at_.positions, LOOM_DTYPE_I32, n);
  if (m.positions == EncoderPositions::table) {
    op(LOOM_OP_GET_ROWS, h, {pos_embd_, positions});
    op(LOOM_OP_ADD, x, {x, h});
  }
  if (tok_norm_w_.buffer != nullptr) norm(x, x, tok_norm_w_, tok_norm_b_);
  const loom_tensor seqs = tensor_view(compute_, at_.seqs, LOOM_DTYPE_I32, 2, n_seqs);
  for (size_t il = 0; il < layers_.size(); il++) {
    const LayerWeights& l = layers_[il];
    const bool local = m.layer_local[il];
    // Attention, from x (post-norm) or from its norm (modern-bert's layer 0: x itself).
    loom_tensor in = x;
    if (m.block != EncoderBlock::post_norm && l.ln1_w.buffer != nullptr) {
      norm(nx, x, l.ln1_w, l.ln1_b);
      in = nx;
    }
    linear(q, l.wq, l.bq, in);
    linear(k, l.wk, l.bk, in);
    linear(v, l.wv, l.bv, in);
    if (l.q_ln_w.buffer != nullptr) op(LOOM_OP_LAYER_NORM, q, {q, l.q_ln_w, l.q_ln_b}, &norm_);
    if (l.k_ln_w.buffer != nullptr) op(LOOM_OP_LAYER_NORM, k, {k, l.k_ln_w, l.k_ln_b}, &norm_);
    if (m.qk_norm) {
      op(LOOM_OP_RMS_NORM, heads(q, m.n_heads), {heads(q, m.n_heads), l.q_norm}, &norm_);
      op(LOOM_OP_RMS_NORM, heads(k, m.n_kv_heads), {heads(k, m.n_kv_heads), l.k_norm}, &norm_);
    }
    if (m.positions == EncoderPositions::rope) {
      const loom_rope_params* rope = local ? &rope_local_ : &rope_global_;
      op(LOOM_OP_ROPE, heads(q, m.n_heads), {heads(q, m.n_heads), positions}, rope);
      op(LOOM_OP_ROPE, heads(k, m.n_kv_heads), {heads(k, m.n_kv_heads), positions}, rope);
    }
    op(LOOM_OP_ATTENTION, heads(a, m.n_heads), {heads(q, m.n_heads), heads(k, m.n_kv_heads), heads(v, m.n_kv_heads), seqs},
       local ? &attn_local_ : &attn_global_);
    linear(h, l.wo, l.bo, a);
    switch (m.block) {
      case EncoderBlock::post_norm:
        op(LOOM_OP_ADD, h, {h, x});
        if (l.ln1b_w.buffer != nullptr) {  // jina-bert-v2 (some): the layer input added again, and a second norm
          op(LOOM_OP_LAYER_NORM, nx, {h, l.ln1_w, l.ln1_b}, &norm_);
          op(LOOM_OP_ADD, h, {nx, x});
          op(LOOM_OP_LAYER_NORM, x, {h, l.ln1b_w, l.ln1b_b}, &norm_);
        } else {
          op(LOOM_OP_LAYER_NORM, x, {h, l.ln1_w, l.ln1_b}, &norm_);
        }
        feed_forward(l, x);
        op(LOOM_OP_ADD, h, {h, x});
        op(LOOM_OP_LAYER_NORM, x, {h, l.ln2_w, l.ln2_b}, &norm_);
        break;
      case EncoderBlock::pre_norm:
      case EncoderBlock::sandwich:
        if (m.block == EncoderBlock::sandwich) norm(h, h, l.post1, no_tensor());
        op(LOOM_OP_ADD, x, {x, h});
        norm(nx, x, l.ln2_w, l.ln2_b);
        feed_forward(l, nx);
        if (m.block == EncoderBlock::sandwich) norm(h, h, l.post2, no_tensor());
        op(LOOM_OP_ADD, x, {x, h});
        break;
    }
  }
  if (out_norm_.buffer != nullptr) norm(x, x, out_norm_, no_tensor());
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
      if (m.pooling == Pooling::rank) {  // the first row ([CLS]), or the mean of the rows, through the heads
        const std::vector<float> pooled = pool_rows(&hidden[row * c], m.classifier_pooling == Pooling::mean ? count : 1, c, false);
        out[first + b] = classify(pooled.data());
        row += count;
        continue;
      }
      // The mean of its rows, or its first or last row; then the dense projections, if any.
      const size_t pick = m.pooling == Pooling::mean || m.pooling == Pooling::cls ? row : row + count - 1;
      out[first + b] = pool_rows(&hidden[pick * c], m.pooling == Pooling::mean ? count : 1, c, normalize && dense_.empty());
      if (!dense_.empty()) {
        const std::vector<float> projected = project(out[first + b]);
        out[first + b] = pool_rows(projected.data(), 1, projected.size(), normalize);
      }
      row += count;
    }
  }
  return out;
}

}  // namespace loom::embed
