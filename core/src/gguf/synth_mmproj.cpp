#include "gguf/synth_mmproj.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "gguf/synth_builder.h"

namespace loom::gguf {

namespace {

// Gemma 4's encoder in the layout of llama.cpp's converter (conversion/gemma.py, Gemma4VisionAudioModel):
// no patch bias, a position table per axis, q/k norms per head, post-attention and post-FFN norms, a
// layer scalar, clamp bounds beside most linears (some left out, as unbounded), std_bias/std_scale and
// an input projection [dim, n_embd_text]. Bounds are tight enough that the clamps bite.
void write_gemma4v(const SynthMmprojSpec& spec, GgufWriter& writer) {
  SynthSpec weights;
  weights.seed = spec.seed;
  weights.weight_type = spec.weight_type;
  ModelBuilder b(weights, writer);
  const int64_t c = spec.dim, p = spec.patch_size, ff = spec.ff_dim, d = spec.dim / spec.n_heads;
  const float in_scale = 1.0f / std::sqrt(float(c));
  int bounded = 0;  // which linear: every fifth has no bounds, the rest alternate tight and loose ones
  auto clamped = [&](const std::string& base, int64_t n_in, int64_t n_out, float scale) {
    b.matrix(base + ".weight", n_in, n_out, scale);
    const int k = bounded++;
    if (k % 5 == 4) return;
    const float in = k % 2 == 0 ? 1.25f : 2.5f, out = k % 2 == 0 ? 0.75f : 1.5f;
    b.vector(base + ".input_min", 1, -in, 0.0f);
    b.vector(base + ".input_max", 1, in * 0.8f, 0.0f);
    b.vector(base + ".output_min", 1, -out * 0.9f, 0.0f);
    b.vector(base + ".output_max", 1, out, 0.0f);
  };
  b.matrix_of(LOOM_DTYPE_F32, "v.patch_embd.weight", {p, p, 3, c}, 1.0f / std::sqrt(float(p * p * 3)));
  // Enough positions for the largest square image at these sizes (66 patches per side at patch 8, merge 2).
  b.matrix_of(LOOM_DTYPE_F32, "v.position_embd.weight", {c, 96, 2}, 0.2f);
  for (int il = 0; il < spec.n_layers; il++) {
    const std::string n = "v.blk." + std::to_string(il) + ".";
    b.vector(n + "ln1.weight", c, 1.0f, 0.1f);
    clamped(n + "attn_q", c, c, 2.0f * in_scale);
    clamped(n + "attn_k", c, c, 2.0f * in_scale);
    clamped(n + "attn_v", c, c, in_scale);
    // Norm weights of 0.5: with the attention at scale 1, weights of 1 make its logits as large as d and
    // magnify llama.cpp's F16 rounding (its GELU table) fourfold in the rows compared against.
    b.vector(n + "attn_q_norm.weight", d, 0.5f, 0.1f);
    b.vector(n + "attn_k_norm.weight", d, 0.5f, 0.1f);
    clamped(n + "attn_out", c, c, in_scale);
    b.vector(n + "attn_post_norm.weight", c, 1.0f, 0.1f);
    b.vector(n + "ln2.weight", c, 1.0f, 0.1f);
    clamped(n + "ffn_gate", c, ff, in_scale);
    clamped(n + "ffn_up", c, ff, in_scale);
    clamped(n + "ffn_down", ff, c, 1.0f / std::sqrt(float(ff)));
    b.vector(n + "ffn_post_norm.weight", c, 1.0f, 0.1f);
    b.vector(n + "out_scale.weight", 1, 0.7f + 0.2f * float(il), 0.0f);
  }
  b.vector("v.std_bias", c, 0.0f, 0.5f);
  b.vector("v.std_scale", c, 1.0f, 0.2f);
  clamped("mm.input_projection", c, spec.n_embd_text, in_scale);
}

// Qwen2.5-VL's encoder in the layout of llama.cpp's converter (conversion/qwenvl.py): the 3-D patch
// kernel as two 2-D frames, no position table, RMS norms, biased q/k/v/out, a SiLU-gated FFN with
// biases, full attention every n_wa_pattern-th layer, the post norm and the merger (mm.0, mm.2).
void write_qwen25vl(const SynthMmprojSpec& spec, GgufWriter& writer) {
  writer.set_bool("clip.use_silu", true);
  writer.set_uint32("clip.vision.n_wa_pattern", 2);
  writer.set_float32_array("clip.vision.image_mean", {0.48145466f, 0.4578275f, 0.40821073f});
  writer.set_float32_array("clip.vision.image_std", {0.26862954f, 0.26130258f, 0.27577711f});
  SynthSpec weights;
  weights.seed = spec.seed;
  weights.weight_type = spec.weight_type;
  ModelBuilder b(weights, writer);
  const int64_t c = spec.dim, p = spec.patch_size, ff = spec.ff_dim, merged = 4 * spec.dim;
  const float in_scale = 1.0f / std::sqrt(float(c));
  b.matrix_of(LOOM_DTYPE_F32, "v.patch_embd.weight", {p, p, 3, c}, 0.7f / std::sqrt(float(p * p * 3)));
  b.matrix_of(LOOM_DTYPE_F32, "v.patch_embd.weight.1", {p, p, 3, c}, 0.7f / std::sqrt(float(p * p * 3)));
  for (int il = 0; il < spec.n_layers; il++) {
    const std::string n = "v.blk." + std::to_string(il) + ".";
    b.vector(n + "ln1.weight", c, 1.0f, 0.1f);
    for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      const bool qk = std::string(w) == "attn_q" || std::string(w) == "attn_k";
      b.matrix(n + w + ".weight", c, c, qk ? 2.0f * in_scale : in_scale);
      b.vector(n + w + ".bias", c, 0.0f, 0.1f);
    }
    b.vector(n + "ln2.weight", c, 1.0f, 0.1f);
    b.matrix(n + "ffn_gate.weight", c, ff, in_scale);
    b.vector(n + "ffn_gate.bias", ff, 0.0f, 0.1f);
    b.matrix(n + "ffn_up.weight", c, ff, in_scale);
    b.vector(n + "ffn_up.bias", ff, 0.0f, 0.1f);
    b.matrix(n + "ffn_down.weight", ff, c, 1.0f / std::sqrt(float(ff)));
    b.vector(n + "ffn_down.bias", c, 0.0f, 0.1f);
  }
  b.vector("v.post_ln.weight", c, 1.0f, 0.1f);
  b.matrix("mm.0.weight", merged, merged, 1.0f / std::sqrt(float(merged)));
  b.vector("mm.0.bias", merged, 0.0f, 0.1f);
  b.matrix("mm.2.weight", merged, spec.n_embd_text, 1.0f / std::sqrt(float(merged)));
  b.vector("mm.2.bias", spec.n_embd_text, 0.0f, 0.1f);
}

// Qwen3-VL's layout: the 3-D patch kernel as two 2-D frames plus a bias, a learned position table of
// (image_size / patch)² positions, layer norms with biases, q/k/v in one biased matrix, a GELU FFN,
// the post norm, the merger (mm.0, mm.2), and deepstack mergers on the last min(3, layers) layers
// (Qwen3-VL-2B has them on layers 5, 11, 17 of 24; where they sit does not change the graph).
void write_qwen3vl(const SynthMmprojSpec& spec, GgufWriter& writer) {
  writer.set_bool("clip.use_gelu", true);
  writer.set_float32_array("clip.vision.image_mean", {0.5f, 0.5f, 0.5f});
  writer.set_float32_array("clip.vision.image_std", {0.5f, 0.5f, 0.5f});
  SynthSpec weights;
  weights.seed = spec.seed;
  weights.weight_type = spec.weight_type;
  ModelBuilder b(weights, writer);
  const int64_t c = spec.dim, p = spec.patch_size, ff = spec.ff_dim, merged = 4 * spec.dim, side = spec.image_size / spec.patch_size;
  const float in_scale = 1.0f / std::sqrt(float(c));
  b.matrix_of(LOOM_DTYPE_F32, "v.patch_embd.weight", {p, p, 3, c}, 0.7f / std::sqrt(float(p * p * 3)));
  b.matrix_of(LOOM_DTYPE_F32, "v.patch_embd.weight.1", {p, p, 3, c}, 0.7f / std::sqrt(float(p * p * 3)));
  b.vector("v.patch_embd.bias", c, 0.0f, 0.1f);
  b.matrix_of(LOOM_DTYPE_F32, "v.position_embd.weight", {c, side * side}, 0.3f);
  for (int il = 0; il < spec.n_layers; il++) {
    const std::string n = "v.blk." + std::to_string(il) + ".";
    b.vector(n + "ln1.weight", c, 1.0f, 0.1f);
    b.vector(n + "ln1.bias", c, 0.0f, 0.1f);
    b.matrix(n + "attn_qkv.weight", c, 3 * c, 1.5f * in_scale);
    b.vector(n + "attn_qkv.bias", 3 * c, 0.0f, 0.1f);
    b.matrix(n + "attn_out.weight", c, c, in_scale);
    b.vector(n + "attn_out.bias", c, 0.0f, 0.1f);
    b.vector(n + "ln2.weight", c, 1.0f, 0.1f);
    b.vector(n + "ln2.bias", c, 0.0f, 0.1f);
    b.matrix(n + "ffn_up.weight", c, ff, in_scale);
    b.vector(n + "ffn_up.bias", ff, 0.0f, 0.1f);
    b.matrix(n + "ffn_down.weight", ff, c, 1.0f / std::sqrt(float(ff)));
    b.vector(n + "ffn_down.bias", c, 0.0f, 0.1f);
  }
  for (int il = std::max(0, spec.n_layers - 3); il < spec.n_layers; il++) {
    const std::string n = "v.deepstack." + std::to_string(il) + ".";
    b.vector(n + "norm.weight", merged, 1.0f, 0.1f);
    b.vector(n + "norm.bias", merged, 0.0f, 0.1f);
    b.matrix(n + "fc1.weight", merged, merged, 1.0f / std::sqrt(float(merged)));
    b.vector(n + "fc1.bias", merged, 0.0f, 0.1f);
    b.matrix(n + "fc2.weight", merged, spec.n_embd_text, 1.0f / std::sqrt(float(merged)));
    b.vector(n + "fc2.bias", spec.n_embd_text, 0.0f, 0.1f);
  }
  b.vector("v.post_ln.weight", c, 1.0f, 0.1f);
  b.vector("v.post_ln.bias", c, 0.0f, 0.1f);
  b.matrix("mm.0.weight", merged, merged, 1.0f / std::sqrt(float(merged)));
  b.vector("mm.0.bias", merged, 0.0f, 0.1f);
  b.matrix("mm.2.weight", merged, spec.n_embd_text, 1.0f / std::sqrt(float(merged)));
  b.vector("mm.2.bias", spec.n_embd_text, 0.0f, 0.1f);
}

}  // namespace

void write_synthetic_mmproj(const SynthMmprojSpec& spec, const std::filesystem::path& out) {
  const bool mlp = spec.projector == "mlp", pixtral = spec.projector == "pixtral", idefics3 = spec.projector == "idefics3";
  const bool gemma4v = spec.projector == "gemma4v", qwen25vl = spec.projector == "qwen25vl", qwen3vl = spec.projector == "qwen3vl";
  if (spec.projector != "gemma3" && !mlp && !pixtral && !idefics3 && !gemma4v && !qwen25vl && !qwen3vl)
    throw Error("synthetic mmproj: projector '" + spec.projector + "' is not supported (gemma3, gemma4v, mlp, pixtral, idefics3, qwen25vl, qwen3vl)");
  const int merge = mlp || pixtral || gemma4v || qwen25vl || qwen3vl ? 1 : spec.merge;  // these take any multiple of their cell
  if (spec.patch_size <= 0 || spec.image_size % spec.patch_size != 0 || merge <= 0 || (spec.image_size / spec.patch_size) % merge != 0)
    throw Error("synthetic mmproj: image_size must be a multiple of patch_size * merge");
  if (spec.n_heads <= 0 || spec.dim % spec.n_heads != 0) throw Error("synthetic mmproj: dim must be a multiple of n_heads");
  GgufWriter writer;
  writer.set_string("general.architecture", "clip");
  writer.set_string("general.name", "loom-synthetic-mmproj");
  writer.set_bool("clip.has_vision_encoder", true);
  writer.set_bool("clip.has_text_encoder", false);
  writer.set_string("clip.projector_type", qwen25vl ? "qwen2.5vl_merger" : qwen3vl ? "qwen3vl_merger" : spec.projector);  // clip.cpp's names
  // CLIP (mlp) runs quick GELU, which clip.cpp picks when use_gelu is false; SigLIP runs GELU; Pixtral
  // a SiLU-gated FFN. Gemma 4's converter writes neither key (so clip.cpp gates with quick GELU).
  if (!gemma4v && !qwen25vl && !qwen3vl) writer.set_bool("clip.use_gelu", !mlp && !pixtral);
  if (pixtral) writer.set_bool("clip.use_silu", true);
  if (mlp) writer.set_bool("clip.has_llava_projector", true);
  writer.set_uint32("clip.vision.image_size", uint32_t(spec.image_size));
  writer.set_uint32("clip.vision.patch_size", uint32_t(spec.patch_size));
  writer.set_uint32("clip.vision.embedding_length", uint32_t(spec.dim));
  writer.set_uint32("clip.vision.feed_forward_length", uint32_t(spec.ff_dim));
  writer.set_uint32("clip.vision.block_count", uint32_t(spec.n_layers));
  writer.set_uint32("clip.vision.attention.head_count", uint32_t(spec.n_heads));
  writer.set_uint32("clip.vision.projection_dim", uint32_t(spec.n_embd_text));
  writer.set_float32("clip.vision.attention.layer_norm_epsilon", pixtral ? 1e-5f : 1e-6f);
  if (pixtral) writer.set_uint32("clip.vision.spatial_merge_size", uint32_t(spec.merge));
  if (qwen25vl || qwen3vl) {
    if (qwen25vl) write_qwen25vl(spec, writer);
    else write_qwen3vl(spec, writer);
    writer.write(out);
    return;
  }
  if (gemma4v) {  // pixels in [0, 1]; the encoder takes them as 2x - 1
    writer.set_float32_array("clip.vision.image_mean", {0.0f, 0.0f, 0.0f});
    writer.set_float32_array("clip.vision.image_std", {1.0f, 1.0f, 1.0f});
    writer.set_uint32("clip.vision.projector.scale_factor", uint32_t(spec.merge));
    write_gemma4v(spec, writer);
    writer.write(out);
    return;
  }
  if (mlp || pixtral) {  // OpenAI CLIP's normalisation
    writer.set_float32_array("clip.vision.image_mean", {0.48145466f, 0.4578275f, 0.40821073f});
    writer.set_float32_array("clip.vision.image_std", {0.26862954f, 0.26130258f, 0.27577711f});
  } else {  // SigLIP's
    writer.set_float32_array("clip.vision.image_mean", {0.5f, 0.5f, 0.5f});
    writer.set_float32_array("clip.vision.image_std", {0.5f, 0.5f, 0.5f});
    writer.set_uint32("clip.vision.projector.scale_factor", uint32_t(spec.merge));
    if (idefics3) writer.set_uint32("clip.vision.preproc_image_size", uint32_t(spec.longest_edge > 0 ? spec.longest_edge : 2 * spec.image_size));
  }

  SynthSpec weights;  // the builder's seed and matrix type
  weights.seed = spec.seed;
  weights.weight_type = spec.weight_type;
  ModelBuilder b(weights, writer);
  const int64_t c = spec.dim, p = spec.patch_size, ff = spec.ff_dim, grid = spec.image_size / spec.patch_size;
  const float in_scale = 1.0f / std::sqrt(float(c));
  b.matrix_of(LOOM_DTYPE_F32, "v.patch_embd.weight", {p, p, 3, c}, 1.0f / std::sqrt(float(p * p * 3)));
  if (!pixtral) b.vector("v.patch_embd.bias", c, 0.0f, 0.1f);
  if (mlp) b.vector("v.class_embd", c, 0.0f, 0.5f);
  // Pixtral has no position table: its positions are the 2-D RoPE's.
  if (!pixtral) b.matrix_of(LOOM_DTYPE_F32, "v.position_embd.weight", {c, grid * grid + (mlp ? 1 : 0)}, 0.2f);
  if (mlp || pixtral) b.vector("v.pre_ln.weight", c, 1.0f, 0.1f);
  if (mlp) b.vector("v.pre_ln.bias", c, 0.0f, 0.1f);
  for (int il = 0; il < spec.n_layers; il++) {
    const std::string n = "v.blk." + std::to_string(il) + ".";
    // Pixtral: RMS norms and linears without biases, a gated FFN.
    b.vector(n + "ln1.weight", c, 1.0f, 0.1f);
    if (!pixtral) b.vector(n + "ln1.bias", c, 0.0f, 0.1f);
    for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      // q and k larger than the rest, so the attention is far from uniform and a wrong mask shows.
      const bool qk = std::string(w) == "attn_q" || std::string(w) == "attn_k";
      b.matrix(n + w + ".weight", c, c, qk ? 2.0f * in_scale : in_scale);
      if (!pixtral) b.vector(n + w + ".bias", c, 0.0f, 0.1f);
    }
    b.vector(n + "ln2.weight", c, 1.0f, 0.1f);
    if (!pixtral) b.vector(n + "ln2.bias", c, 0.0f, 0.1f);
    if (pixtral) b.matrix(n + "ffn_gate.weight", c, ff, in_scale);
    b.matrix(n + "ffn_up.weight", c, ff, in_scale);
    if (!pixtral) b.vector(n + "ffn_up.bias", ff, 0.0f, 0.1f);
    b.matrix(n + "ffn_down.weight", ff, c, 1.0f / std::sqrt(float(ff)));
    if (!pixtral) b.vector(n + "ffn_down.bias", c, 0.0f, 0.1f);
  }
  if (pixtral) {
    // Mistral Small 3.1's patch merger (with a merge factor above 1), the projector, the break row.
    const int64_t hidden = spec.proj_hidden > 0 ? spec.proj_hidden : spec.n_embd_text, m = spec.merge;
    if (m > 1) {
      b.vector("mm.input_norm.weight", c, 1.0f, 0.1f);
      b.matrix("mm.patch_merger.weight", c * m * m, c, 1.0f / std::sqrt(float(c * m * m)));
    }
    b.matrix("mm.1.weight", c, hidden, in_scale);
    b.vector("mm.1.bias", hidden, 0.0f, 0.1f);
    b.matrix("mm.2.weight", hidden, spec.n_embd_text, 1.0f / std::sqrt(float(hidden)));
    b.vector("mm.2.bias", spec.n_embd_text, 0.0f, 0.1f);
    b.vector("v.token_embd.img_break", spec.n_embd_text, 0.0f, 1.0f);
  } else if (mlp) {
    // LLaVA's converter drops CLIP's post-layernorm (the feature layer is the second-to-last).
    const int64_t hidden = spec.proj_hidden > 0 ? spec.proj_hidden : spec.n_embd_text;
    b.matrix("mm.0.weight", c, hidden, in_scale);
    b.vector("mm.0.bias", hidden, 0.0f, 0.1f);
    b.matrix("mm.2.weight", hidden, spec.n_embd_text, 1.0f / std::sqrt(float(hidden)));
    b.vector("mm.2.bias", spec.n_embd_text, 0.0f, 0.1f);
  } else {
    b.vector("v.post_ln.weight", c, 1.0f, 0.1f);
    b.vector("v.post_ln.bias", c, 0.0f, 0.1f);
    if (idefics3) {  // SmolVLM's connector: one linear over merge x merge pixel-shuffled patches
      const int64_t merged = c * spec.merge * spec.merge;
      b.matrix("mm.model.fc.weight", merged, spec.n_embd_text, 1.0f / std::sqrt(float(merged)));
    } else {
      // The converter forces the projection to F16 and stores it as [n_embd_text, dim]; the norm holds 1 + w.
      b.matrix_of(LOOM_DTYPE_F16, "mm.input_projection.weight", {int64_t(spec.n_embd_text), c}, in_scale);
      b.vector("mm.soft_emb_norm.weight", c, 1.0f, 0.1f);
    }
  }
  writer.write(out);
}

}  // namespace loom::gguf
