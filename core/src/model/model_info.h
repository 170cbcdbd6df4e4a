// ModelInfo — the hyper-parameters of a decoder-only transformer, read from GGUF metadata with
// llama.cpp's key names and per-architecture defaults (llama-model.cpp, load_hparams).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/backend.h"

namespace loom::gguf {
class GgufFile;
}

namespace loom {

enum class ModelArch { llama, qwen2, qwen2moe, qwen3, qwen3moe, qwen35, qwen35moe, qwen3next, gpt_oss, gemma2, gemma3, gemma4, olmo2, granite, smollm3, phi3, mistral3 };

// The attention and FFN geometry of one layer. Most families repeat one shape; Gemma 4 gives its
// sliding-window and global layers different head sizes, rotary dims and KV heads, widens the FFN
// of its last layers, and lets those layers attend over an earlier layer's KV cache.
struct LayerShape {
  int32_t head_dim = 0;
  int32_t n_kv_heads = 0;
  int32_t n_rot = 0;
  int32_t ff_dim = 0;
  int32_t kv_source = 0;  // the layer whose K/V this layer attends over: itself unless shared
};

struct ModelInfo {
  ModelArch arch = ModelArch::llama;
  std::string arch_name;  // general.architecture
  std::string name;       // general.name

  int32_t n_layers = 0;
  int32_t dim = 0;         // embedding_length
  int32_t n_heads = 0;
  // Global (non-sliding) layers' values; `layers` has each layer's own. n_kv_heads and ff_dim are
  // the largest over the layers.
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;    // attention.key_length (== value_length)
  int32_t ff_dim = 0;
  std::vector<LayerShape> layers;  // [n_layers]
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;

  // Rotary embedding. Global layers use rope_freq_base/scale; local (sliding-window) layers use the
  // _local pair (gemma3: base 10000, no scaling).
  loom_rope_mode rope_mode = LOOM_ROPE_NORMAL;
  int32_t n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  int32_t n_rot_local = 0;  // rope.dimension_count_swa (default n_rot)
  float rope_freq_base_local = 10000.0f;
  float rope_freq_scale_local = 1.0f;
  bool rope_freq_factors = false;  // rope_freqs.weight [n_rot / 2] divides each pair's frequency (Llama 3.1+)
  // LongRoPE (Phi-3.5, Phi-4-mini): rope_factors_long/short.weight, the long ones used when the
  // context exceeds the original (pre-extension) one, as llama.cpp chooses them.
  bool rope_long_short = false;
  int32_t n_ctx_original = 0;      // rope.scaling.original_context_length (default: n_ctx_train)
  // YaRN (rope.scaling.type yarn): the ramp between original and interpolated frequencies.
  bool rope_yarn = false;
  float yarn_ext_factor = 0.0f, yarn_corr_low = 0.0f, yarn_corr_high = 0.0f;
  // Rotated q and k are multiplied by this (rope.scaling.attn_factor, YaRN's mscale), so q·k by
  // its square: folded into attention_scale.
  float rope_magnitude = 1.0f;
  // mistral3 (Llama 4's temperature tuning): q *= 1 + t * ln(floor(pos / n_ctx_original) + 1); 0 = off.
  float attn_temperature_scale = 0.0f;

  float rms_eps = 1e-5f;
  uint32_t sliding_window = 0;      // tokens a local layer sees (0 = none)
  std::vector<bool> layer_is_local;  // [n_layers]
  std::vector<bool> layer_uses_rope; // [n_layers]; smollm3 leaves every fourth layer unrotated
  float attention_scale = 0.0f;      // multiplies q·k
  float embedding_scale = 1.0f;      // multiplies the token embeddings (gemma: sqrt(dim))
  float attn_softcap = 0.0f;         // gemma2: attention logits = cap * tanh(logits / cap); 0 = none
  float final_softcap = 0.0f;        // gemma2: output logits = cap * tanh(logits / cap); 0 = none
  float residual_scale = 1.0f;       // granite: multiplies each block's output before the residual add
  float logit_scale = 1.0f;          // granite: multiplies the logits (1 / granite.logit_scale)

  loom_activation ffn_activation = LOOM_ACTIVATION_SILU;
  bool qkv_bias = false;    // qwen2
  // qwen2vl (Qwen2-VL, Qwen2.5-VL text): M-RoPE, pairs of the rotary dims by (time, height, width,
  // extra) section; text alone turns as NEOX rope.
  bool mrope = false;
  int32_t rope_sections[4] = {0, 0, 0, 0};
  // qwen3vl (Qwen3-VL text): the sections interleave (ABI 1.13), and a given row (an image's) is
  // (1 + n_deepstack) x dim values: its input, then what is added to each of the first n_deepstack
  // layers' outputs.
  bool mrope_interleaved = false;
  int64_t n_deepstack = 0;
  int64_t embd_row_width() const { return dim * (1 + n_deepstack); }
  bool pre_norms = true;    // RMS norm before attention and FFN (olmo2 has none: only post norms)
  bool qk_norm = false;     // gemma3, qwen3: RMS norm of each q and k head before rope
  bool qk_norm_full = false;  // olmo2: the q/k norm spans all heads at once ([q_dim], [kv_dim] weights)
  bool post_norms = false;  // gemma2, gemma3, olmo2: norms after attention and after the FFN, before the residual add
  bool tied_output = false; // no output.weight: the logits reuse token_embd
  bool fused_qkv = false;   // phi3: one attn_qkv matrix [dim, q_dim + 2 kv_dim] (q, k, v rows in order)
  bool fused_gate_up = false;  // phi3: one ffn_up matrix [dim, 2 ff] (gate rows, then up rows)
  // gemma4: each v head RMS-normed (no weight); rope_freqs only on global layers; a scalar output
  // scale per layer (layer_output_scale); per-layer embeddings of this many values per layer (0 = none).
  bool v_norm = false;
  bool freq_factors_global_only = false;
  bool layer_output_scale = false;
  int32_t per_layer_dim = 0;
  // Mixture of experts (qwen3moe): each layer's FFN is n_expert experts of expert_ff_dim, of which a
  // router (ffn_gate_inp) picks n_expert_used per token and weighs their outputs.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t expert_ff_dim = 0;
  loom_moe_gating expert_gating = LOOM_MOE_GATING_SOFTMAX;
  bool expert_weights_norm = false;   // the chosen experts' weights divided by their sum
  float expert_weights_scale = 0.0f;  // then multiplied by this (0 = none)

  // gpt-oss: a learned sink score per head in every layer's softmax; biases on the router and the
  // experts; the FFN pre-norm stored as post_attention_norm.
  bool attn_sinks = false;
  bool expert_biases = false;
  std::string ffn_norm_name = "ffn_norm";
  // qwen2moe: a shared expert every token runs beside the chosen ones, its output scaled by
  // sigmoid(h · ffn_gate_inp_shexp); 0 = none.
  int32_t shared_expert_ff_dim = 0;

  // Hybrid models (qwen35): Gated DeltaNet layers beside full-attention ones. A recurrent layer
  // keeps a per-sequence state instead of KV: a short-conv state [d_conv - 1, conv_dim] and a delta
  // rule state [d_k, d_v, n_v_heads]. Its q, k (n_k_heads of d_k) and v (n_v_heads of d_v) come
  // from one projection through the short convolution. The attention layers' q projection carries
  // an output gate (attn_output_gate: per head, q then gate), applied as sigmoid(gate) * attention.
  std::vector<bool> layer_is_recurrent;  // [n_layers]; empty = none
  int32_t ssm_d_conv = 0;
  int32_t ssm_d_k = 0, ssm_n_k_heads = 0;
  int32_t ssm_d_v = 0, ssm_n_v_heads = 0;
  bool attn_output_gate = false;
  // qwen3next: value heads grouped by key head (v head h reads key head h / (n_v / n_k); qwen35's
  // files are reordered to tiled, h % n_k), and beta/alpha in one projection, per key head first the
  // group's betas then its alphas (ssm_ba).
  bool ssm_grouped_heads = false;
  bool ssm_fused_beta_alpha = false;

  bool is_moe() const { return n_expert > 0; }
  bool is_hybrid() const { return ssm_d_conv > 0; }
  // Some layer keeps its own K/V and sees only the last sliding_window tokens.
  bool has_sliding_layers() const {
    if (sliding_window == 0) return false;
    for (int32_t il = 0; il < n_layers; ++il)
      if (layer_is_local[size_t(il)] && owns_kv(il)) return true;
    return false;
  }
  bool is_recurrent(int32_t il) const { return is_hybrid() && layer_is_recurrent[static_cast<size_t>(il)]; }
  int32_t ssm_key_dim() const { return ssm_d_k * ssm_n_k_heads; }
  int32_t ssm_value_dim() const { return ssm_d_v * ssm_n_v_heads; }
  int32_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_value_dim(); }
  // Floats of one sequence's state in one recurrent layer.
  int64_t ssm_conv_state_size() const { return int64_t{ssm_d_conv - 1} * ssm_conv_dim(); }
  int64_t ssm_delta_state_size() const { return int64_t{ssm_d_k} * ssm_d_v * ssm_n_v_heads; }
  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  const LayerShape& layer(int32_t il) const { return layers[static_cast<size_t>(il)]; }
  int32_t q_dim(int32_t il) const { return n_heads * layer(il).head_dim; }
  int32_t kv_dim(int32_t il) const { return layer(il).n_kv_heads * layer(il).head_dim; }
  // Attention layers that store K/V of their own (not gemma4's shared ones, not recurrent layers).
  bool owns_kv(int32_t il) const { return layer(il).kv_source == il && !is_recurrent(il); }
};

// Read and check the hyper-parameters. loom::Error naming the file and key for an unsupported
// architecture, a missing key or an inconsistent value. `tied_output` and `n_vocab` are taken from
// the tensor list.
ModelInfo read_model_info(const gguf::GgufFile& file);

std::string arch_list();  // "llama, qwen2, qwen2moe, qwen3, qwen3moe, gpt-oss, gemma2, gemma3, gemma4, olmo2, granite, smollm3, phi3, mistral3"

}  // namespace loom
