#include "vision/vision_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"

namespace loom::vision {

namespace {

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

}  // namespace

VisionEncoder::VisionEncoder(MmprojInfo info, Backend& backend) : info_(std::move(info)), backend_(backend) {}
VisionEncoder::~VisionEncoder() = default;

std::unique_ptr<VisionEncoder> VisionEncoder::load(const std::filesystem::path& mmproj, Backend& backend) {
  const gguf::GgufFile file = gguf::GgufFile::open(mmproj);
  return load(file, backend);
}

std::unique_ptr<VisionEncoder> VisionEncoder::load(const gguf::GgufFile& file, Backend& backend) {
  std::unique_ptr<VisionEncoder> encoder(new VisionEncoder(read_mmproj_info(file), backend));
  encoder->load_weights(file);
  encoder->build_ops();
  // Ask once for every op of the list, so a backend without the encoder ops is refused at load with
  // its reason, not at the first image.
  for (const loom_op& op : encoder->ops_) {
    const std::string reason = backend.unsupported_reason(op);
    if (!reason.empty())
      throw Error(file.label() + ": backend '" + backend.name() + "' cannot run this vision encoder: " + reason);
  }
  return encoder;
}

void VisionEncoder::load_weights(const gguf::GgufFile& file) {
  const MmprojInfo& m = info_;
  // How each tensor is stored on the backend: vectors and the position table as F32 (ops read them
  // so), matrices in their file type, the projection transposed (the file holds it [n_embd_text, dim]).
  enum class Form { f32, weight, transposed };
  struct Planned {
    const gguf::TensorInfo* source;
    loom_tensor* target;
    Form form;
    loom_dtype dtype;
    uint64_t offset, bytes;
  };
  std::vector<Planned> plan;
  uint64_t total = 0;
  auto add = [&](const std::string& name, std::vector<int64_t> dims, loom_tensor* target, Form form, bool optional = false) {
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) {
      if (!optional) throw Error(file.label() + ": tensor '" + name + "' is missing (required by the " + projector_type_name(m.projector) + " projector)");
      *target = no_tensor();
      return;
    }
    if (t->dims != dims) throw Error(file.label() + ": tensor '" + name + "' has shape " + shape_text(t->dims) + ", expected " + shape_text(dims));
    loom_dtype dtype = t->type;
    if (form == Form::f32) dtype = LOOM_DTYPE_F32;
    if (form == Form::transposed) dtype = t->type == LOOM_DTYPE_F16 ? LOOM_DTYPE_F16 : LOOM_DTYPE_F32;
    if (form != Form::f32 && !backend_.supports_weight_dtype(dtype))
      throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(dtype) + ", which backend '" + backend_.name() + "' does not support");
    if (dtype != t->type && dtype_traits(t->type) != nullptr && t->type != LOOM_DTYPE_F32 && t->type != LOOM_DTYPE_F16 &&
        t->type != LOOM_DTYPE_BF16 && t->type != LOOM_DTYPE_Q8_0 && t->type != LOOM_DTYPE_Q4_0)
      throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) + ", which Loom cannot convert to " + dtype_name(dtype));
    uint64_t rows = 1;
    for (size_t i = 1; i < dims.size(); i++) rows *= uint64_t(dims[i]);
    const int64_t row_length = form == Form::transposed ? dims[1] : dims[0];
    if (form == Form::transposed) rows = uint64_t(dims[0]);
    const uint64_t bytes = dtype_row_bytes(dtype, row_length) * rows;
    plan.push_back({t, target, form, dtype, total, bytes});
    total = align_up(total + bytes, 256);
  };

  const int64_t c = m.dim, p = m.patch_size;
  add("v.patch_embd.weight", {p, p, 3, c}, &patch_w_, Form::weight);
  add("v.patch_embd.bias", {c}, &patch_b_, Form::f32, /*optional=*/true);
  if (m.class_embedding) add("v.class_embd", {c}, &class_, Form::f32);
  add("v.position_embd.weight", {c, m.n_positions()}, &pos_, Form::f32);
  add("v.pre_ln.weight", {c}, &pre_ln_w_, Form::f32, true);
  add("v.pre_ln.bias", {c}, &pre_ln_b_, Form::f32, true);
  // Only the layers the encoder runs are loaded (LLaVA's last layer is never used).
  const std::string up = m.ffn_swapped ? "ffn_down" : "ffn_up", down = m.ffn_swapped ? "ffn_up" : "ffn_down";
  layers_.resize(size_t(m.n_layers_run));
  for (int64_t il = 0; il < m.n_layers_run; il++) {
    LayerWeights& l = layers_[size_t(il)];
    const std::string b = "v.blk." + std::to_string(il) + ".";
    add(b + "ln1.weight", {c}, &l.ln1_w, Form::f32, true);
    add(b + "ln1.bias", {c}, &l.ln1_b, Form::f32, true);
    add(b + "attn_q.weight", {c, c}, &l.wq, Form::weight);
    add(b + "attn_q.bias", {c}, &l.bq, Form::f32, true);
    add(b + "attn_k.weight", {c, c}, &l.wk, Form::weight);
    add(b + "attn_k.bias", {c}, &l.bk, Form::f32, true);
    add(b + "attn_v.weight", {c, c}, &l.wv, Form::weight);
    add(b + "attn_v.bias", {c}, &l.bv, Form::f32, true);
    add(b + "attn_out.weight", {c, c}, &l.wo, Form::weight);
    add(b + "attn_out.bias", {c}, &l.bo, Form::f32, true);
    add(b + "ln2.weight", {c}, &l.ln2_w, Form::f32, true);
    add(b + "ln2.bias", {c}, &l.ln2_b, Form::f32, true);
    add(b + up + ".weight", {c, m.ff_dim}, &l.up, Form::weight);
    add(b + up + ".bias", {m.ff_dim}, &l.up_b, Form::f32, true);
    add(b + down + ".weight", {m.ff_dim, c}, &l.down, Form::weight);
    add(b + down + ".bias", {c}, &l.down_b, Form::f32, true);
  }
  add("v.post_ln.weight", {c}, &post_ln_w_, Form::f32, true);
  add("v.post_ln.bias", {c}, &post_ln_b_, Form::f32, true);
  switch (m.projector) {
    case ProjectorType::gemma3:
      add("mm.input_projection.weight", {m.n_embd_text, c}, &proj_, Form::transposed);
      add("mm.soft_emb_norm.weight", {c}, &soft_norm_, Form::f32);
      break;
    case ProjectorType::mlp:
      add("mm.0.weight", {c, m.proj_hidden}, &mm0_w_, Form::weight);
      add("mm.0.bias", {m.proj_hidden}, &mm0_b_, Form::f32);
      add("mm.2.weight", {m.proj_hidden, m.n_embd_text}, &mm2_w_, Form::weight);
      add("mm.2.bias", {m.n_embd_text}, &mm2_b_, Form::f32);
      break;
  }

  weights_ = backend_.alloc(total, LOOM_BUFFER_USAGE_WEIGHTS);
  for (const Planned& t : plan) {
    const auto& d = t.source->dims;
    const std::span<const uint8_t> data = file.tensor_data(*t.source);
    std::vector<uint8_t> converted;
    std::span<const uint8_t> bytes = data;
    if (t.form == Form::transposed) {
      const std::vector<float> values = dequantize_rows(t.source->type, data, t.source->n_elements);
      std::vector<float> flipped(values.size());  // [d0, d1] -> [d1, d0]
      for (int64_t i = 0; i < d[1]; i++)
        for (int64_t j = 0; j < d[0]; j++) flipped[size_t(j * d[1] + i)] = values[size_t(i * d[0] + j)];
      converted = quantize_rows(t.dtype, flipped, d[1]);
      bytes = converted;
      *t.target = tensor_view(weights_, t.offset, t.dtype, d[1], d[0]);
    } else {
      if (t.dtype != t.source->type) {
        const std::vector<float> values = dequantize_rows(t.source->type, data, t.source->n_elements);
        converted.resize(values.size() * 4);
        std::memcpy(converted.data(), values.data(), converted.size());
        bytes = converted;
      }
      // The patch kernel [p, p, 3, dim] is read by MATMUL as [p * p * 3, dim].
      if (t.target == &patch_w_) *t.target = tensor_view(weights_, t.offset, t.dtype, d[0] * d[1] * d[2], d[3]);
      else *t.target = tensor_view(weights_, t.offset, t.dtype, d[0], d.size() > 1 ? d[1] : 1);
    }
    if (bytes.size() != t.bytes) throw Error(file.label() + ": tensor '" + t.source->name + "' converted to an unexpected size");
    backend_.upload(weights_, t.offset, bytes.data(), t.bytes);
    backend_.synchronize();  // `converted` is reused; the file's mapping may go away after load
  }
}

void VisionEncoder::build_ops() {
  const MmprojInfo& m = info_;
  // n: the rows through the ViT (patches, then the CLS row where there is one).
  const int64_t c = m.dim, n_patches = m.n_patches(), n = m.n_positions(), p = m.patch_size, s = m.image_size, grid = m.grid();
  const int64_t n_out = m.n_image_tokens();
  const int64_t widest = std::max<int64_t>({c, m.ff_dim, p * p * 3, m.proj_hidden});
  norm_ = {sizeof(loom_norm_params), m.eps};
  attn_ = {sizeof(loom_encoder_attention_params), 1.0f / std::sqrt(float(m.head_dim)), 0, 0};
  patch_ = {sizeof(loom_patch_params), m.patch_size};
  pool_ = {sizeof(loom_pool_params), m.merge};
  ffn_act_ = {sizeof(loom_glu_params), m.gelu_quick ? LOOM_ACTIVATION_GELU_QUICK : LOOM_ACTIVATION_GELU_TANH};
  gelu_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_GELU_TANH};

  // Scratch: the image, x, h, q, k, v, attention out, the widest row set (patches, FFN, projector), the
  // pooled rows, the output.
  uint64_t offset = 0;
  auto reserve = [&](uint64_t floats) {
    const uint64_t at = offset;
    offset = align_up(offset + floats * 4, 256);
    return at;
  };
  off_image_ = reserve(uint64_t(3 * s * s));
  const uint64_t off_x = reserve(uint64_t(c * n)), off_h = reserve(uint64_t(c * n)), off_q = reserve(uint64_t(c * n));
  const uint64_t off_k = reserve(uint64_t(c * n)), off_v = reserve(uint64_t(c * n)), off_a = reserve(uint64_t(c * n));
  const uint64_t off_wide = reserve(uint64_t(widest * n)), off_pool = reserve(uint64_t(c * n_out));
  off_out_ = reserve(uint64_t(m.n_embd_text * n_out));
  compute_ = backend_.alloc(offset, LOOM_BUFFER_USAGE_COMPUTE);

  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) { return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2); };
  ops_.clear();
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs, const void* params = nullptr) {
    ops_.push_back(make_op(type, dst, srcs, params));
  };
  auto add_bias = [&](const loom_tensor& x, const loom_tensor& bias) {
    if (bias.buffer != nullptr) op(LOOM_OP_ADD, x, {x, bias});
  };
  auto linear = [&](const loom_tensor& dst, const loom_tensor& w, const loom_tensor& bias, const loom_tensor& x) {
    op(LOOM_OP_MATMUL, dst, {w, x});
    add_bias(dst, bias);
  };
  auto layer_norm = [&](const loom_tensor& dst, const loom_tensor& x, const loom_tensor& w, const loom_tensor& b) {
    if (w.buffer != nullptr || b.buffer != nullptr) op(LOOM_OP_LAYER_NORM, dst, {x, w, b}, &norm_);
  };

  const loom_tensor x = f32(off_x, c, n), h = f32(off_h, c, n), q = f32(off_q, c, n), k = f32(off_k, c, n), v = f32(off_v, c, n);
  const loom_tensor a = f32(off_a, c, n), patches = f32(off_wide, p * p * 3, n_patches), ffn = f32(off_wide, m.ff_dim, n);
  op(LOOM_OP_PATCHES, patches, {f32(off_image_, s, s, 3)}, &patch_);
  linear(f32(off_x, c, n_patches), patch_w_, patch_b_, patches);
  if (class_.buffer != nullptr) op(LOOM_OP_COPY, f32(off_x + uint64_t(c * n_patches) * 4, c), {class_});
  op(LOOM_OP_ADD, x, {x, pos_});
  layer_norm(x, x, pre_ln_w_, pre_ln_b_);
  for (const LayerWeights& l : layers_) {
    op(LOOM_OP_LAYER_NORM, h, {x, l.ln1_w, l.ln1_b}, &norm_);
    linear(q, l.wq, l.bq, h);
    linear(k, l.wk, l.bk, h);
    linear(v, l.wv, l.bv, h);
    auto heads = [&](const loom_tensor& t) { return reshape(t, m.head_dim, m.n_heads, n); };
    op(LOOM_OP_ATTENTION, heads(a), {heads(q), heads(k), heads(v)}, &attn_);
    linear(h, l.wo, l.bo, a);
    op(LOOM_OP_ADD, x, {x, h});
    op(LOOM_OP_LAYER_NORM, h, {x, l.ln2_w, l.ln2_b}, &norm_);
    linear(ffn, l.up, l.up_b, h);
    op(LOOM_OP_UNARY, ffn, {ffn}, &ffn_act_);
    linear(h, l.down, l.down_b, ffn);
    op(LOOM_OP_ADD, x, {x, h});
  }
  layer_norm(x, x, post_ln_w_, post_ln_b_);
  const loom_tensor out = f32(off_out_, m.n_embd_text, n_out);
  switch (m.projector) {
    case ProjectorType::gemma3: {
      // The patch grid (row-major, x fastest) pooled merge x merge, then normalised and projected.
      const loom_tensor pooled = f32(off_pool, c, n_out);
      op(LOOM_OP_POOL_2D, f32(off_pool, c, grid / m.merge, grid / m.merge), {reshape(x, c, grid, grid)}, &pool_);
      op(LOOM_OP_RMS_NORM, pooled, {pooled, soft_norm_}, &norm_);
      op(LOOM_OP_MATMUL, out, {proj_, pooled});
      break;
    }
    case ProjectorType::mlp: {
      // clip.cpp takes rows 1..n_patches: with a CLS row (placed last) that drops the first patch and
      // keeps the CLS row. Loom takes the same rows, so its images read as mtmd's do.
      const int64_t first = m.class_embedding ? 1 : 0;
      const loom_tensor selected = f32(off_x + uint64_t(c * first) * 4, c, n_out), hidden = f32(off_wide, m.proj_hidden, n_out);
      linear(hidden, mm0_w_, mm0_b_, selected);
      op(LOOM_OP_UNARY, hidden, {hidden}, &gelu_);
      linear(out, mm2_w_, mm2_b_, hidden);
      break;
    }
  }
}

std::vector<float> VisionEncoder::encode(const RgbImage& image) { return encode_pixels(preprocess_image(image, info_.preprocess)); }

std::vector<float> VisionEncoder::encode_pixels(std::span<const float> pixels) {
  const uint64_t expected = uint64_t(3) * info_.image_size * info_.image_size;
  if (pixels.size() != expected)
    throw Error("vision encoder: " + std::to_string(pixels.size()) + " pixel values, expected " + std::to_string(expected));
  backend_.upload(compute_, off_image_, pixels.data(), expected * 4);
  backend_.run(ops_);
  std::vector<float> rows(size_t(info_.n_image_tokens() * info_.n_embd_text));
  backend_.download(rows.data(), compute_, off_out_, rows.size() * 4);
  backend_.synchronize();
  return rows;
}

}  // namespace loom::vision
