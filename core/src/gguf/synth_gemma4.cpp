// A synthetic Gemma 4 in the layout of llama.cpp's converter (conversion/gemma.py, Gemma4Model),
// small but with every feature the real checkpoints combine:
//  - sliding-window layers with head_dim and half rotary dims, every third layer global with
//    2 * head_dim, half the KV heads and "proportional" rope (rope_freqs: only the first quarter
//    of the pairs rotate);
//  - global layers that own their KV use the key projection as values (attention_k_eq_v);
//  - the last layers share the KV cache of the last sliding and global layer before them, and their
//    FFN is twice as wide (use_double_wide_mlp);
//  - per-layer embeddings (32 values per layer and token) and a scalar output scale per layer.
#include "gguf/synth_gemma4.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/synth_builder.h"

namespace loom::gguf {

namespace {

constexpr int kPerLayerDim = 32;  // embedding_length_per_layer_input (256 in the E2B/E4B checkpoints)

bool is_global(int layer) { return (layer + 1) % 3 == 0; }

// The first layer whose KV comes from an earlier layer: a multiple of 3 past the middle, so the
// layer before it is global and the one before that local (llama.cpp's sharing rule).
int first_shared_layer(int n_layers) {
  if (n_layers < 6) return n_layers;
  int k = (n_layers + 1) / 2;
  while (k % 3 != 0) ++k;
  return k < n_layers ? k : n_layers;
}

}  // namespace

void build_gemma4_model(const SynthSpec& spec, GgufWriter& writer) {
  const std::string a = spec.arch;
  const int n = spec.n_layers, first_shared = first_shared_layer(n);
  if (spec.n_kv_heads % 2 != 0) throw Error("synthetic model: gemma4 needs an even n_kv_heads (global layers use half)");
  const int hd_local = spec.head_dim, hd_global = 2 * spec.head_dim;
  const int kv_local = spec.n_kv_heads, kv_global = spec.n_kv_heads / 2;
  const int ple = kPerLayerDim;

  std::vector<bool> swa;
  std::vector<int32_t> kv_heads, ff;
  for (int il = 0; il < n; ++il) {
    swa.push_back(!is_global(il));
    kv_heads.push_back(is_global(il) ? kv_global : kv_local);
    ff.push_back(il < first_shared ? spec.ff_dim : 2 * spec.ff_dim);
  }
  writer.set_uint32(a + ".context_length", static_cast<uint32_t>(spec.n_ctx));
  writer.set_uint32(a + ".embedding_length", static_cast<uint32_t>(spec.dim));
  writer.set_uint32(a + ".block_count", static_cast<uint32_t>(n));
  writer.set_int32_array(a + ".feed_forward_length", ff);
  writer.set_uint32(a + ".attention.head_count", static_cast<uint32_t>(spec.n_heads));
  writer.set_int32_array(a + ".attention.head_count_kv", kv_heads);
  writer.set_uint32(a + ".attention.key_length", static_cast<uint32_t>(hd_global));
  writer.set_uint32(a + ".attention.value_length", static_cast<uint32_t>(hd_global));
  writer.set_uint32(a + ".attention.key_length_swa", static_cast<uint32_t>(hd_local));
  writer.set_uint32(a + ".attention.value_length_swa", static_cast<uint32_t>(hd_local));
  writer.set_float32(a + ".attention.layer_norm_rms_epsilon", spec.rms_eps);
  writer.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
  writer.set_bool_array(a + ".attention.sliding_window_pattern", swa);
  writer.set_uint32(a + ".attention.shared_kv_layers", static_cast<uint32_t>(n - first_shared));
  writer.set_uint32(a + ".embedding_length_per_layer_input", static_cast<uint32_t>(ple));
  writer.set_uint32(a + ".rope.dimension_count", static_cast<uint32_t>(hd_global));
  writer.set_uint32(a + ".rope.dimension_count_swa", static_cast<uint32_t>(hd_local / 2));
  writer.set_float32(a + ".rope.freq_base", spec.rope_freq_base);
  writer.set_float32(a + ".rope.freq_base_swa", 10000.0f);
  writer.set_float32(a + ".final_logit_softcapping", 30.0f);
}

void add_gemma4_tensors(const SynthSpec& spec, GgufWriter& writer) {
  ModelBuilder model(spec, writer);
  const int n = spec.n_layers, first_shared = first_shared_layer(n), ple = kPerLayerDim;
  const int64_t dim = spec.dim, hd_local = spec.head_dim, hd_global = 2 * spec.head_dim;
  auto inv_sqrt = [](int64_t v) { return 1.0f / std::sqrt(static_cast<float>(v)); };

  model.matrix("token_embd.weight", dim, spec.n_vocab, inv_sqrt(dim));
  model.vector("output_norm.weight", dim, 1.0f, 0.05f);
  model.matrix("per_layer_token_embd.weight", int64_t{ple} * n, spec.n_vocab, 1.0f);
  model.matrix("per_layer_model_proj.weight", dim, int64_t{ple} * n, 1.0f);
  model.vector("per_layer_proj_norm.weight", ple, 1.0f, 0.05f);
  // Proportional rope: the first quarter of the global head's pairs rotate, the rest get a divisor
  // so large that they stay put (the converter's 1e30).
  std::vector<float> freqs(static_cast<size_t>(hd_global / 2), 1e30f);
  for (int64_t i = 0; i < hd_global / 8; ++i) freqs[static_cast<size_t>(i)] = 1.0f;
  writer.add_tensor("rope_freqs.weight", LOOM_DTYPE_F32, {hd_global / 2},
                    quantize_rows(LOOM_DTYPE_F32, freqs, hd_global / 2));

  for (int il = 0; il < n; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const bool global = is_global(il), owns_kv = il < first_shared;
    const int64_t hd = global ? hd_global : hd_local;
    const int64_t q_dim = spec.n_heads * hd, kv_dim = (global ? spec.n_kv_heads / 2 : spec.n_kv_heads) * hd;
    const int64_t ff = owns_kv ? spec.ff_dim : 2 * spec.ff_dim;
    model.vector(p + "attn_norm.weight", dim, 1.0f, 0.05f);
    model.matrix(p + "attn_q.weight", dim, q_dim, inv_sqrt(dim));
    // Gemma 4 leaves q·k unscaled: its trained q/k norm weights do the 1/sqrt(head_dim). Norm
    // weights of 1 would give scores up to head_dim and a softmax so sharp that llama.cpp's F16
    // rounding of activations moves the logits by 0.02 (an f64 NumPy evaluation agrees with Loom).
    const float qk_norm_scale = 1.0f / std::sqrt(std::sqrt(static_cast<float>(hd)));
    model.vector(p + "attn_q_norm.weight", hd, qk_norm_scale, 0.05f * qk_norm_scale);
    if (owns_kv) {
      model.matrix(p + "attn_k.weight", dim, kv_dim, inv_sqrt(dim));
      if (!global) model.matrix(p + "attn_v.weight", dim, kv_dim, inv_sqrt(dim));  // global: values = keys
      model.vector(p + "attn_k_norm.weight", hd, qk_norm_scale, 0.05f * qk_norm_scale);
    }
    model.matrix(p + "attn_output.weight", q_dim, dim, inv_sqrt(q_dim));
    model.vector(p + "post_attention_norm.weight", dim, 1.0f, 0.05f);
    model.vector(p + "ffn_norm.weight", dim, 1.0f, 0.05f);
    model.matrix(p + "ffn_gate.weight", dim, ff, inv_sqrt(dim));
    model.matrix(p + "ffn_up.weight", dim, ff, inv_sqrt(dim));
    model.matrix(p + "ffn_down.weight", ff, dim, inv_sqrt(ff));
    model.vector(p + "post_ffw_norm.weight", dim, 1.0f, 0.05f);
    model.matrix(p + "inp_gate.weight", dim, ple, inv_sqrt(dim));
    model.matrix(p + "proj.weight", ple, dim, inv_sqrt(ple));
    model.vector(p + "post_norm.weight", dim, 1.0f, 0.05f);
    model.vector(p + "layer_output_scale.weight", 1, 1.0f, 0.25f);
  }
}

}  // namespace loom::gguf
