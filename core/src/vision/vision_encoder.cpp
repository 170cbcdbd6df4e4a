#include "vision/vision_encoder.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <optional>

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

// A one-value tensor (gemma4v's layer scalars and clamp bounds, as the converter writes them: [1]).
std::optional<float> scalar_tensor(const gguf::GgufFile& file, const std::string& name) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (t == nullptr) return std::nullopt;
  if (t->n_elements != 1) throw Error(file.label() + ": tensor '" + name + "' has shape " + shape_text(t->dims) + ", expected one value");
  if (dtype_traits(t->type) == nullptr) throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) + ", which Loom cannot read");
  const float v = dequantize_rows(t->type, file.tensor_data(*t), 1)[0];
  if (!std::isfinite(v)) throw Error(file.label() + ": tensor '" + name + "' is not a finite number");
  return v;
}

// Gemma4ClippableLinear's bounds beside `base`.weight (clip.cpp: an absent bound is unbounded).
LinearClamp linear_clamp(const gguf::GgufFile& file, const std::string& base) {
  auto bounds = [&](const char* lo_name, const char* hi_name) {
    const std::optional<float> lo = scalar_tensor(file, base + lo_name), hi = scalar_tensor(file, base + hi_name);
    loom_clamp_params p{};
    if (!lo && !hi) return p;
    p = {sizeof(loom_clamp_params), lo.value_or(-FLT_MAX), hi.value_or(FLT_MAX)};
    if (!(p.min <= p.max)) throw Error(file.label() + ": '" + base + lo_name + "' is above '" + base + hi_name + "'");
    return p;
  };
  return {bounds(".input_min", ".input_max"), bounds(".output_min", ".output_max")};
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
  encoder->allocate_scratch();
  const MmprojInfo& m = encoder->info();
  // The ops of a typical grid are checked at load (a dynamic projector's other grids use the same ops).
  if (m.dynamic()) {
    const ImageSize size = target_size(m.preprocess, 1024, 768);
    encoder->build_ops(size.width / m.patch_size, size.height / m.patch_size);
  } else {
    encoder->build_ops(m.grid(), m.grid());
  }
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
  // pixtral's patch merger has its input reordered from (channel, ky, kx) to (ky, kx, channel), so the
  // merged rows are whole patch rows side by side (vision_encoder_ops.cpp).
  // gemma4v's std_bias is stored negated, so the ops add it. Qwen's two patch kernels (the frames of its
  // 3-D convolution, both of which see the same still image) are stored summed.
  enum class Form { f32, weight, transposed, merger, negated, frames_summed };
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
    if (form == Form::f32 || form == Form::negated || form == Form::frames_summed) dtype = LOOM_DTYPE_F32;
    if (form == Form::transposed || form == Form::merger) dtype = t->type == LOOM_DTYPE_F16 ? LOOM_DTYPE_F16 : LOOM_DTYPE_F32;
    if (dtype != LOOM_DTYPE_F32 && !backend_.supports_weight_dtype(dtype))
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
  const bool qwen = m.projector == ProjectorType::qwen25vl || m.projector == ProjectorType::qwen3vl;
  add("v.patch_embd.weight", {p, p, 3, c}, &patch_w_, qwen ? Form::frames_summed : Form::weight);
  if (qwen) {
    const gguf::TensorInfo* second = file.find_tensor("v.patch_embd.weight.1");
    if (second == nullptr || second->dims != std::vector<int64_t>{p, p, 3, c})
      throw Error(file.label() + ": tensor 'v.patch_embd.weight.1' is missing or not " + shape_text({p, p, 3, c}));
  }
  add("v.patch_embd.bias", {c}, &patch_b_, Form::f32, /*optional=*/true);
  if (m.class_embedding) add("v.class_embd", {c}, &class_, Form::f32);
  if (!m.dynamic()) add("v.position_embd.weight", {c, m.n_positions()}, &pos_, Form::f32);
  if (m.pos_table > 0) add("v.position_embd.weight", {c, m.pos_table, 2}, &pos_, Form::f32);  // [c, 2 * pos_table] on the backend
  if (m.pos_side > 0) {  // kept on the host: each grid takes its own bilinear resize (upload_resized_positions)
    const gguf::TensorInfo* t = file.find_tensor("v.position_embd.weight");
    if (dtype_traits(t->type) == nullptr) throw Error(file.label() + ": tensor 'v.position_embd.weight' has type " + dtype_name(t->type) + ", which Loom cannot read");
    pos_table_ = dequantize_rows(t->type, file.tensor_data(*t), t->n_elements);
  }
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
    if (m.projector == ProjectorType::qwen3vl) {  // split into row ranges after the upload
      add(b + "attn_qkv.weight", {c, 3 * c}, &l.qkv, Form::weight);
      add(b + "attn_qkv.bias", {3 * c}, &l.qkv_b, Form::f32, true);
    } else {
      add(b + "attn_q.weight", {c, c}, &l.wq, Form::weight);
      add(b + "attn_q.bias", {c}, &l.bq, Form::f32, true);
      add(b + "attn_k.weight", {c, c}, &l.wk, Form::weight);
      add(b + "attn_k.bias", {c}, &l.bk, Form::f32, true);
      add(b + "attn_v.weight", {c, c}, &l.wv, Form::weight);
      add(b + "attn_v.bias", {c}, &l.bv, Form::f32, true);
    }
    add(b + "attn_out.weight", {c, c}, &l.wo, Form::weight);
    add(b + "attn_out.bias", {c}, &l.bo, Form::f32, true);
    if (m.gemma4_blocks) {
      add(b + "attn_q_norm.weight", {m.head_dim}, &l.q_norm, Form::f32);
      add(b + "attn_k_norm.weight", {m.head_dim}, &l.k_norm, Form::f32);
      add(b + "attn_post_norm.weight", {c}, &l.attn_post_norm, Form::f32);
      add(b + "ffn_post_norm.weight", {c}, &l.ffn_post_norm, Form::f32);
      const std::optional<float> out_scale = scalar_tensor(file, b + "out_scale.weight");
      l.out_scale = {out_scale ? uint32_t(sizeof(loom_scale_params)) : 0u, out_scale.value_or(1.0f)};
      l.clamp_q = linear_clamp(file, b + "attn_q");
      l.clamp_k = linear_clamp(file, b + "attn_k");
      l.clamp_v = linear_clamp(file, b + "attn_v");
      l.clamp_o = linear_clamp(file, b + "attn_out");
      l.clamp_gate = linear_clamp(file, b + "ffn_gate");
      l.clamp_up = linear_clamp(file, b + up);
      l.clamp_down = linear_clamp(file, b + down);
    }
    add(b + "ln2.weight", {c}, &l.ln2_w, Form::f32, true);
    add(b + "ln2.bias", {c}, &l.ln2_b, Form::f32, true);
    if (m.ffn_gated) {
      add(b + "ffn_gate.weight", {c, m.ff_dim}, &l.gate, Form::weight);
      add(b + "ffn_gate.bias", {m.ff_dim}, &l.gate_b, Form::f32, true);
    }
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
    case ProjectorType::pixtral:
      if (m.patch_merger) {
        add("mm.input_norm.weight", {c}, &merger_norm_, Form::f32);
        add("mm.patch_merger.weight", {c * m.merge * m.merge, c}, &merger_, Form::merger);
      }
      add("mm.1.weight", {c, m.proj_hidden}, &mm0_w_, Form::weight);
      add("mm.1.bias", {m.proj_hidden}, &mm0_b_, Form::f32, true);
      add("mm.2.weight", {m.proj_hidden, m.n_embd_text}, &mm2_w_, Form::weight);
      add("mm.2.bias", {m.n_embd_text}, &mm2_b_, Form::f32, true);
      if (m.img_break) add("v.token_embd.img_break", {m.n_embd_text}, &img_break_, Form::f32);
      break;
    case ProjectorType::idefics3:
      add("mm.model.fc.weight", {c * m.merge * m.merge, m.n_embd_text}, &fc_, Form::weight);
      break;
    case ProjectorType::qwen25vl:
      add("mm.0.weight", {4 * c, m.proj_hidden}, &mm0_w_, Form::weight);
      add("mm.0.bias", {m.proj_hidden}, &mm0_b_, Form::f32, true);
      add("mm.2.weight", {m.proj_hidden, m.n_embd_text}, &mm2_w_, Form::weight);
      add("mm.2.bias", {m.n_embd_text}, &mm2_b_, Form::f32, true);
      break;
    case ProjectorType::qwen3vl:
      add("mm.0.weight", {4 * c, m.proj_hidden}, &mm0_w_, Form::weight);
      add("mm.0.bias", {m.proj_hidden}, &mm0_b_, Form::f32, true);
      add("mm.2.weight", {m.proj_hidden, m.n_embd_text}, &mm2_w_, Form::weight);
      add("mm.2.bias", {m.n_embd_text}, &mm2_b_, Form::f32, true);
      deepstack_.resize(m.deepstack_layers.size());
      for (size_t i = 0; i < deepstack_.size(); i++) {
        DeepstackWeights& d = deepstack_[i];
        const std::string b = "v.deepstack." + std::to_string(m.deepstack_layers[i]) + ".";
        add(b + "norm.weight", {4 * c}, &d.norm_w, Form::f32);
        add(b + "norm.bias", {4 * c}, &d.norm_b, Form::f32);
        add(b + "fc1.weight", {4 * c, m.proj_hidden}, &d.fc1, Form::weight);
        add(b + "fc1.bias", {m.proj_hidden}, &d.fc1_b, Form::f32, true);
        add(b + "fc2.weight", {m.proj_hidden, m.n_embd_text}, &d.fc2, Form::weight);
        add(b + "fc2.bias", {m.n_embd_text}, &d.fc2_b, Form::f32, true);
      }
      break;
    case ProjectorType::gemma4v:
      add("mm.input_projection.weight", {c, m.n_embd_text}, &proj_, Form::weight);
      proj_clamp_ = linear_clamp(file, "mm.input_projection");
      add("v.std_bias", {c}, &std_bias_, Form::negated, true);
      add("v.std_scale", {c}, &std_scale_, Form::f32, true);
      if ((std_bias_.buffer == nullptr) != (std_scale_.buffer == nullptr))
        throw Error(file.label() + ": tensors 'v.std_bias' and 'v.std_scale' come together (one is missing)");
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
    } else if (t.form == Form::merger) {
      const std::vector<float> values = dequantize_rows(t.source->type, data, t.source->n_elements);
      const int64_t k = m.merge, cells = k * k;
      std::vector<float> reordered(values.size());  // per output row: (c, ky, kx) -> (ky, kx, c)
      for (int64_t o = 0; o < d[1]; o++)
        for (int64_t ch = 0; ch < c; ch++)
          for (int64_t cell = 0; cell < cells; cell++)
            reordered[size_t(o * d[0] + cell * c + ch)] = values[size_t(o * d[0] + ch * cells + cell)];
      converted = quantize_rows(t.dtype, reordered, d[0]);
      bytes = converted;
      *t.target = tensor_view(weights_, t.offset, t.dtype, d[0], d[1]);
    } else {
      if (t.dtype != t.source->type || t.form == Form::negated || t.form == Form::frames_summed) {
        std::vector<float> values = dequantize_rows(t.source->type, data, t.source->n_elements);
        if (t.form == Form::negated)
          for (float& v : values) v = -v;
        if (t.form == Form::frames_summed) {
          const gguf::TensorInfo& second = *file.find_tensor(t.source->name + ".1");
          const std::vector<float> more = dequantize_rows(second.type, file.tensor_data(second), second.n_elements);
          for (size_t i = 0; i < values.size(); i++) values[i] += more[i];
        }
        converted.resize(values.size() * 4);
        std::memcpy(converted.data(), values.data(), converted.size());
        bytes = converted;
      }
      // The patch kernel [p, p, 3, dim] is read by MATMUL as [p * p * 3, dim].
      if (t.target == &patch_w_) *t.target = tensor_view(weights_, t.offset, t.dtype, d[0] * d[1] * d[2], d[3]);
      else *t.target = tensor_view(weights_, t.offset, t.dtype, d[0], int64_t(t.source->n_elements) / d[0]);
    }
    if (bytes.size() != t.bytes) throw Error(file.label() + ": tensor '" + t.source->name + "' converted to an unexpected size");
    backend_.upload(weights_, t.offset, bytes.data(), t.bytes);
    backend_.synchronize();  // `converted` is reused; the file's mapping may go away after load
  }
  for (LayerWeights& l : layers_) {  // qwen3vl's fused q, k, v: rows (and bias values) in that order
    if (l.qkv.buffer == nullptr) continue;
    l.wq = row_range(l.qkv, 0, c), l.wk = row_range(l.qkv, c, c), l.wv = row_range(l.qkv, 2 * c, c);
    if (l.qkv_b.buffer == nullptr) continue;
    loom_tensor* parts[3] = {&l.bq, &l.bk, &l.bv};
    for (int i = 0; i < 3; i++) *parts[i] = tensor_view(weights_, l.qkv_b.offset + uint64_t(i * c) * 4, LOOM_DTYPE_F32, c);
  }
}

std::vector<float> VisionEncoder::encode(const RgbImage& image) {
  if (info_.tiled()) {  // each tile, then the overview, through the encoder
    std::vector<float> rows;
    for (const std::vector<float>& tile : preprocess_tiles(image, info_.preprocess)) {
      const std::vector<float> part = encode_pixels(tile);
      rows.insert(rows.end(), part.begin(), part.end());
    }
    return rows;
  }
  // A very long thin image can round to more patches than the projector allows (its short side is
  // raised to one cell): refused before any pixel is resized.
  const ImageSize target = target_size(info_.preprocess, image.width, image.height);
  const uint64_t patches = uint64_t(target.width / info_.patch_size) * (target.height / info_.patch_size);
  if (info_.dynamic() && patches > uint64_t(max_patches_))
    throw Error("vision encoder: a " + std::to_string(image.width) + "x" + std::to_string(image.height) + " image becomes " +
                std::to_string(target.width) + "x" + std::to_string(target.height) + ", " + std::to_string(patches) +
                " patches, more than the " + std::to_string(max_patches_) + " this " + projector_type_name(info_.projector) +
                " projector takes (too long and thin)");
  const PreprocessedImage pixels = preprocess(image, info_.preprocess);
  return encode_pixels(pixels.pixels, pixels.width, pixels.height);
}

std::vector<float> VisionEncoder::encode_pixels(std::span<const float> pixels, uint32_t width, uint32_t height) {
  const MmprojInfo& m = info_;
  const uint64_t expected = uint64_t(3) * width * height;
  if (pixels.size() != expected)
    throw Error("vision encoder: " + std::to_string(pixels.size()) + " pixel values, expected " + std::to_string(expected));
  const bool fits = m.dynamic() ? width % m.preprocess.align == 0 && height % m.preprocess.align == 0 &&
                                      uint64_t(width / m.patch_size) * (height / m.patch_size) <= uint64_t(max_patches_)
                                : width == m.image_size && height == m.image_size;
  if (width == 0 || height == 0 || !fits)
    throw Error("vision encoder: a " + std::to_string(width) + "x" + std::to_string(height) + " input does not fit this " +
                projector_type_name(m.projector) + " projector");
  const int64_t gx = width / m.patch_size, gy = height / m.patch_size;
  if (m.pos_table > 0 && (gx > m.pos_table || gy > m.pos_table))
    throw Error("vision encoder: a " + std::to_string(width) + "x" + std::to_string(height) + " input has " + std::to_string(gx) + "x" +
                std::to_string(gy) + " patches, more per side than the " + std::to_string(m.pos_table) + " positions of this projector's table");
  if (gx != ops_gx_ || gy != ops_gy_) build_ops(gx, gy);
  if (m.projector == ProjectorType::gemma4v) {  // Gemma 4's encoder takes its normalised pixels as 2x - 1
    std::vector<float> scaled(pixels.begin(), pixels.end());
    for (float& v : scaled) v = v * 2.0f - 1.0f;
    backend_.upload(compute_, at_.image, scaled.data(), expected * 4);
    backend_.synchronize();
  } else {
    backend_.upload(compute_, at_.image, pixels.data(), expected * 4);
  }
  upload_positions(gx, gy);
  if (m.pos_side > 0) upload_resized_positions(gx, gy);
  backend_.run(ops_);
  std::vector<float> rows(size_t(m.rows_for(width, height) * m.row_width()));
  backend_.download(rows.data(), compute_, at_.out, rows.size() * 4);
  backend_.synchronize();
  return rows;
}

}  // namespace loom::vision
