#include "gguf/synth_qwen35.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gguf/synth_builder.h"

namespace loom::gguf {

namespace {

constexpr int kConvKernel = 4;

// Every fourth layer is attention, as in the published models; a shallower model still gets one.
int full_attention_interval(const SynthSpec& spec) { return std::min(4, spec.n_layers); }
bool is_recurrent(const SynthSpec& spec, int layer) { return (layer + 1) % full_attention_interval(spec) != 0; }

}  // namespace

void build_qwen35_model(const SynthSpec& spec, GgufWriter& writer) {
  const std::string a = spec.arch;
  auto u32 = [&](const std::string& key, int64_t v) { writer.set_uint32(a + "." + key, static_cast<uint32_t>(v)); };
  u32("context_length", spec.n_ctx);
  u32("embedding_length", spec.dim);
  u32("block_count", spec.n_layers);
  u32("feed_forward_length", spec.ff_dim);
  u32("attention.head_count", spec.n_heads);
  u32("attention.head_count_kv", spec.n_kv_heads);
  u32("attention.key_length", spec.head_dim);
  u32("attention.value_length", spec.head_dim);
  writer.set_float32(a + ".attention.layer_norm_rms_epsilon", spec.rms_eps);
  writer.set_float32(a + ".rope.freq_base", spec.rope_freq_base);
  // Partial rotary embedding as published (a quarter of the head there, half here); Qwen 3.5 splits
  // its pairs into interleaved M-RoPE sections that together cover every pair.
  const int n_rot = spec.head_dim / 2;
  u32("rope.dimension_count", n_rot);
  if (a != "qwen3next") {
    std::vector<int32_t> sections(4, 0);
    for (int pair = 0; pair < n_rot / 2; ++pair) ++sections[static_cast<size_t>(pair % 3)];
    writer.set_int32_array(a + ".rope.dimension_sections", sections);
  }
  u32("full_attention_interval", full_attention_interval(spec));
  u32("ssm.conv_kernel", kConvKernel);
  u32("ssm.state_size", spec.head_dim);
  u32("ssm.group_count", spec.n_kv_heads);
  u32("ssm.time_step_rank", spec.n_heads);
  u32("ssm.inner_size", int64_t{spec.n_heads} * spec.head_dim);
  if (a != "qwen35") {
    u32("expert_count", spec.n_expert);
    u32("expert_used_count", spec.n_expert_used);
    u32("expert_feed_forward_length", spec.expert_ff_dim);
    u32("expert_shared_feed_forward_length", spec.ff_dim);
  }
}

void add_qwen35_tensors(const SynthSpec& spec, GgufWriter& writer) {
  ModelBuilder model(spec, writer);
  const int64_t dim = spec.dim, hd = spec.head_dim, q_dim = int64_t{spec.n_heads} * hd;
  const int64_t kv_dim = int64_t{spec.n_kv_heads} * hd, ff = spec.ff_dim;
  const int64_t key_dim = kv_dim, value_dim = q_dim, conv_dim = 2 * key_dim + value_dim, n_v = spec.n_heads;
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  model.matrix("token_embd.weight", dim, spec.n_vocab, inv_sqrt(dim));
  model.vector("output_norm.weight", dim, 1.0f, 0.05f);
  model.matrix("output.weight", dim, spec.n_vocab, inv_sqrt(dim));
  for (int layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    model.vector(p + "attn_norm.weight", dim, 1.0f, 0.05f);
    if (is_recurrent(spec, layer)) {
      model.matrix(p + "attn_qkv.weight", dim, conv_dim, inv_sqrt(dim));
      model.matrix(p + "attn_gate.weight", dim, value_dim, inv_sqrt(dim));
      model.matrix_of(LOOM_DTYPE_F32, p + "ssm_conv1d.weight", {kConvKernel, conv_dim}, 0.5f);
      // Decays exp(-a * softplus(alpha + dt)) mostly in 0.7..0.95: the state carries many tokens.
      model.vector(p + "ssm_dt.bias", n_v, -2.0f, 0.3f);
      model.vector(p + "ssm_a", n_v, -1.0f, 0.2f);
      if (spec.arch == "qwen3next") {
        // Per key head, its group's beta rows then its alpha rows (value heads grouped by key head).
        model.matrix(p + "ssm_ba.weight", dim, 2 * n_v, 0.75f * inv_sqrt(dim));
      } else {
        model.matrix(p + "ssm_beta.weight", dim, n_v, inv_sqrt(dim));
        model.matrix(p + "ssm_alpha.weight", dim, n_v, 0.5f * inv_sqrt(dim));
      }
      model.vector(p + "ssm_norm.weight", hd, 1.0f, 0.05f);
      model.matrix(p + "ssm_out.weight", value_dim, dim, inv_sqrt(value_dim));
    } else {
      model.matrix(p + "attn_q.weight", dim, 2 * q_dim, inv_sqrt(dim));  // per head: q, then its output gate
      model.matrix(p + "attn_k.weight", dim, kv_dim, inv_sqrt(dim));
      model.matrix(p + "attn_v.weight", dim, kv_dim, inv_sqrt(dim));
      model.vector(p + "attn_q_norm.weight", hd, 1.0f, 0.05f);
      model.vector(p + "attn_k_norm.weight", hd, 1.0f, 0.05f);
      model.matrix(p + "attn_output.weight", q_dim, dim, inv_sqrt(q_dim));
    }
    model.vector(p + "post_attention_norm.weight", dim, 1.0f, 0.05f);
    if (spec.arch != "qwen35") {
      // qwen3moe's experts (an F32 router, spread wide so the choice is clear-cut) and qwen2moe's
      // shared expert, ff_dim wide, with its per-token sigmoid gate.
      const int64_t n_exp = spec.n_expert, eff = spec.expert_ff_dim;
      model.matrix_of(LOOM_DTYPE_F32, p + "ffn_gate_inp.weight", {dim, n_exp}, 4.0f * inv_sqrt(dim));
      model.matrix_of(spec.expert_type, p + "ffn_gate_exps.weight", {dim, eff, n_exp}, inv_sqrt(dim));
      model.matrix_of(spec.expert_type, p + "ffn_up_exps.weight", {dim, eff, n_exp}, inv_sqrt(dim));
      model.matrix_of(spec.expert_type, p + "ffn_down_exps.weight", {eff, dim, n_exp}, inv_sqrt(eff));
      model.vector(p + "ffn_gate_inp_shexp.weight", dim, 0.0f, inv_sqrt(dim));
      model.matrix(p + "ffn_gate_shexp.weight", dim, ff, inv_sqrt(dim));
      model.matrix(p + "ffn_up_shexp.weight", dim, ff, inv_sqrt(dim));
      model.matrix(p + "ffn_down_shexp.weight", ff, dim, inv_sqrt(ff));
      continue;
    }
    model.matrix(p + "ffn_gate.weight", dim, ff, inv_sqrt(dim));
    model.matrix(p + "ffn_up.weight", dim, ff, inv_sqrt(dim));
    model.matrix(p + "ffn_down.weight", ff, dim, inv_sqrt(ff));
  }
}

}  // namespace loom::gguf
