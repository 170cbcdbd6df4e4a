// Hyper-parameters with llama.cpp's semantics. References (llama.cpp, src/llama-model.cpp):
//  - gemma3: swa pattern 6 (layers with (il + 1) % 6 != 0 are local), local rope base 10000 and
//    scale 1, global layers use `gemma3.rope.freq_base` and the file's rope scaling; attention scale
//    1/sqrt(head_dim), except the 27B (62 layers) which uses 1/sqrt(dim / n_heads); embeddings are
//    scaled by sqrt(dim); GELU (tanh) gate; norms stored with the +1 already folded in.
//  - gemma2: swa pattern 2 (even layers local, window 4096 unless given), one rope for all layers,
//    attention and final logit soft-capping (50 and 30 unless given), scales and norms as gemma3
//    without the q/k norms.
//  - gemma4: gemma3's blocks plus a weightless v norm, unscaled q·k, sliding and global layers of
//    different head sizes / KV heads / rotary dims, proportional rope on global layers (rope_freqs),
//    shared KV for the last layers, per-layer embeddings and a scalar output scale per layer.
//  - qwen2: NEOX rope, q/k/v biases.
//  - qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2 attention; a softmax router whose chosen weights are
//    not renormalised, plus a shared expert (expert_shared_feed_forward_length wide) gated per token by
//    sigmoid(h · ffn_gate_inp_shexp).
//  - qwen3: NEOX rope, an RMS norm of each q and k head before rope, no biases.
//  - qwen3vl (Qwen3-VL text): qwen3 with interleaved M-RoPE sections and deepstack: an image row's
//    input is n_deepstack + 1 rows wide, the first the layer-0 input, the others added to the outputs
//    of layers 0 .. n_deepstack - 1 (qwen3vl.cpp).
//  - qwen3moe: qwen3 whose FFNs are mixtures of experts: softmax router over expert_count experts,
//    expert_used_count chosen per token, their weights normalised to sum 1 (llama.cpp: norm_w true).
//  - qwen35 (Qwen 3.5, qwen35.cpp): hybrid. Every full_attention_interval-th layer (default 4) is
//    attention, the others Gated DeltaNet (ssm.* keys; recurrent state per sequence). Attention layers:
//    q projection twice as wide (per head q then an output gate), per-head q/k norms, rope over
//    rope.dimension_count dims (interleaved M-RoPE sections; with a text position in every section it
//    is NEOX rope), output scaled by sigmoid(gate). The FFN pre-norm is named post_attention_norm.
//  - qwen35moe (Qwen 3.5 MoE, qwen35moe.cpp): qwen35's layers with qwen3moe's normalised softmax router
//    plus qwen2moe's sigmoid-gated shared expert.
//  - qwen3next (Qwen3-Next, qwen3next.cpp): qwen35moe's layers with plain NEOX partial rope (no
//    M-RoPE sections), value heads grouped by key head rather than tiled, and the beta and alpha
//    projections fused into ssm_ba (per key head: its group's betas, then its alphas).
//  - gpt-oss (openai-moe.cpp): NEOX rope, even layers sliding-window (pattern 2), a sink score per head,
//    biased q/k/v/o, the FFN pre-norm named post_attention_norm, and a MoE whose router (with a bias)
//    chooses by logit and weighs the chosen by a softmax over them alone; biased experts with the
//    clamped SwiGLU (SWIGLU_OAI).
//  - olmo2: NEOX rope, no norms before attention and FFN, norms after them (before the residual
//    add), and q/k norms over the whole q and k vectors (all heads at once).
//  - phi3: NEOX rope, q/k/v in one matrix and gate/up in one matrix (split into row views at load);
//    LongRoPE files carry long and short frequency factors and an attention factor.
//  - mistral3 (Ministral 3): llama with YaRN and Llama 4's temperature tuning of q beyond the original
//    context (attention.temperature_scale).
//  - smollm3: llama whose every fourth layer ((il + 1) % 4 == 0) has no rotary embedding (NoPE).
//  - granite: llama plus four multipliers: embedding_scale (embeddings), attention.scale (q·k),
//    residual_scale (each block's output), logit_scale (logits are divided by it).
//  - llama (Llama 2/3, TinyLlama, SmolLM, Mistral): NORMAL rope, SiLU gate.
#include "model/model_info.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace loom {

namespace {

class Reader {
 public:
  Reader(const gguf::GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }

  std::optional<uint64_t> opt_uint(const std::string& suffix) const {
    const std::string k = key(suffix);
    const gguf::MetadataValue* value = file_.find(k);
    if (value != nullptr && value->type == gguf::ValueType::array) {
      // Per-layer arrays (some converters write head_count_kv that way): Loom needs them uniform.
      const std::vector<int64_t> values = file_.get_int_array(k);
      if (values.empty()) fail(k, "is an empty array");
      for (int64_t v : values) {
        if (v != values[0]) fail(k, "differs between layers, which Loom does not support");
      }
      if (values[0] < 0) fail(k, "is negative");
      return static_cast<uint64_t>(values[0]);
    }
    return file_.get_uint(k);
  }
  int32_t need_int(const std::string& suffix, int64_t lo, int64_t hi) const {
    const auto v = opt_uint(suffix);
    if (!v) fail(key(suffix), "is missing");
    return checked(suffix, *v, lo, hi);
  }
  int32_t opt_int(const std::string& suffix, int64_t fallback, int64_t lo, int64_t hi) const {
    const auto v = opt_uint(suffix);
    return v ? checked(suffix, *v, lo, hi) : static_cast<int32_t>(fallback);
  }
  // A value per layer: an array of n (llama.cpp's get_key_or_arr) or one value for all layers;
  // `fallback` when absent (< 0: required).
  std::vector<int32_t> per_layer(const std::string& suffix, int32_t n, int64_t fallback, int64_t lo, int64_t hi) const {
    const std::string k = key(suffix);
    const gguf::MetadataValue* value = file_.find(k);
    if (value != nullptr && value->type == gguf::ValueType::array) {
      const std::vector<int64_t> values = file_.get_int_array(k);
      if (values.size() != static_cast<size_t>(n)) {
        fail(k, "has " + std::to_string(values.size()) + " values for " + std::to_string(n) + " layers");
      }
      std::vector<int32_t> out;
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] < lo || values[i] > hi) {
          fail(k + "[" + std::to_string(i) + "]", "is " + std::to_string(values[i]) + " (expected " + std::to_string(lo) +
                                                      ".." + std::to_string(hi) + ")");
        }
        out.push_back(static_cast<int32_t>(values[i]));
      }
      return out;
    }
    if (value == nullptr && fallback < 0) fail(k, "is missing");
    const int32_t one = value == nullptr ? static_cast<int32_t>(fallback) : need_int(suffix, lo, hi);
    return std::vector<int32_t>(static_cast<size_t>(n), one);
  }
  std::optional<float> opt_float(const std::string& suffix) const {
    const auto v = file_.get_float(key(suffix));
    if (!v) return std::nullopt;
    if (!std::isfinite(*v)) fail(key(suffix), "is not finite");
    return static_cast<float>(*v);
  }
  std::optional<std::string> opt_string(const std::string& suffix) const { return file_.get_string(key(suffix)); }
  const gguf::GgufFile& file() const { return file_; }

  [[noreturn]] void fail(const std::string& k, const std::string& what) const {
    throw Error(file_.label() + ": metadata '" + k + "' " + what);
  }

 private:
  int32_t checked(const std::string& suffix, uint64_t v, int64_t lo, int64_t hi) const {
    if (static_cast<int64_t>(v) < lo || static_cast<int64_t>(v) > hi || v > (1ull << 40)) {
      fail(key(suffix), "is " + std::to_string(v) + " (expected " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    }
    return static_cast<int32_t>(v);
  }

  const gguf::GgufFile& file_;
  std::string arch_;
};

// rope.scaling.*: linear or YaRN frequency scaling, the original context and the magnitude factor,
// as llama.cpp's loader and context read them.
void read_rope_scaling(const Reader& r, ModelInfo& info) {
  info.n_ctx_original = r.opt_int("rope.scaling.original_context_length", info.n_ctx_train, 1, 1 << 30);
  info.rope_magnitude = r.opt_float("rope.scaling.attn_factor").value_or(1.0f);
  if (!(info.rope_magnitude > 0.0f)) r.fail(r.key("rope.scaling.attn_factor"), "must be > 0");
  const std::string scaling = r.opt_string("rope.scaling.type").value_or("none");
  const auto factor = r.opt_float("rope.scaling.factor");
  if (scaling == "linear" || scaling == "yarn") {
    if (factor && !(*factor >= 0.0f)) r.fail(r.key("rope.scaling.factor"), "must be >= 0");
    if (factor && *factor > 0.0f) info.rope_freq_scale = 1.0f / *factor;
  } else if (scaling != "none") {
    r.fail(r.key("rope.scaling.type"), "is '" + scaling + "'; Loom supports 'none', 'linear' and 'yarn'");
  } else if (factor && *factor > 1.0f) {
    // Older converters write a factor without a type; llama.cpp treats that as linear.
    info.rope_freq_scale = 1.0f / *factor;
  }
  if (scaling != "yarn") return;

  // YaRN: pairs that turn less than beta_slow times over the original context are interpolated,
  // pairs that turn more than beta_fast times keep their frequency, a linear ramp between
  // (ggml_rope_yarn_corr_dims).
  info.rope_yarn = true;
  info.yarn_ext_factor = r.opt_float("rope.scaling.yarn_ext_factor").value_or(1.0f);
  if (!(info.yarn_ext_factor >= 0.0f && info.yarn_ext_factor <= 1.0f)) r.fail(r.key("rope.scaling.yarn_ext_factor"), "must be in 0..1");
  const float beta_fast = r.opt_float("rope.scaling.yarn_beta_fast").value_or(32.0f);
  const float beta_slow = r.opt_float("rope.scaling.yarn_beta_slow").value_or(1.0f);
  if (!(beta_fast > 0.0f && beta_slow > 0.0f)) r.fail(r.key("rope.scaling.yarn_beta_fast"), "and yarn_beta_slow must be > 0");
  auto corr_dim = [&](float turns) {
    return float(info.n_rot) * std::log(float(info.n_ctx_original) / (turns * 2.0f * std::numbers::pi_v<float>)) / (2.0f * std::log(info.rope_freq_base));
  };
  info.yarn_corr_low = std::max(0.0f, std::floor(corr_dim(beta_fast)));
  info.yarn_corr_high = std::min(float(info.n_rot - 1), std::ceil(corr_dim(beta_slow)));
  // Magnitude: llama.cpp's rope multiplies cos and sin by mscale(factor) = 1 + 0.1 ln(factor), or, with
  // a yarn_log_multiplier m (Mistral, DeepSeek), by mscale(factor, 1) / mscale(factor, m).
  const float scale = 1.0f / info.rope_freq_scale;
  auto mscale = [&](float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
  const float log_mul = r.opt_float("rope.scaling.yarn_log_multiplier").value_or(0.0f);
  if (info.yarn_ext_factor != 0.0f) info.rope_magnitude *= log_mul != 0.0f ? mscale(1.0f) / mscale(log_mul) : mscale(1.0f);
}

// The mixture-of-experts keys every MoE family shares (llama.cpp's LLM_KV_EXPERT_*).
void read_experts(const Reader& r, ModelInfo& info) {
  info.n_expert = r.need_int("expert_count", 1, 4096);
  info.n_expert_used = r.need_int("expert_used_count", 1, info.n_expert);
  info.expert_ff_dim = r.opt_int("expert_feed_forward_length", info.ff_dim / info.n_expert_used, 1, 1 << 22);
  if (info.expert_ff_dim < 1) r.fail(r.key("expert_feed_forward_length"), "is missing");
  info.expert_weights_scale = r.opt_float("expert_weights_scale").value_or(0.0f);
}

// Gated DeltaNet layers (qwen35): the ssm.* keys as llama.cpp names them, which layers are recurrent,
// and the M-RoPE sections of the attention layers.
void read_linear_attention(const Reader& r, ModelInfo& info) {
  info.ssm_d_conv = r.need_int("ssm.conv_kernel", 2, 64);
  info.ssm_d_k = r.need_int("ssm.state_size", 1, 1024);
  info.ssm_n_k_heads = r.need_int("ssm.group_count", 1, 4096);
  info.ssm_n_v_heads = r.need_int("ssm.time_step_rank", 1, 4096);
  const int32_t inner = r.need_int("ssm.inner_size", 1, 1 << 22);
  if (inner % info.ssm_n_v_heads != 0 || inner / info.ssm_n_v_heads != info.ssm_d_k) {
    r.fail(r.key("ssm.inner_size"), "(" + std::to_string(inner) + ") must be time_step_rank (" + std::to_string(info.ssm_n_v_heads) +
                                        ") value heads of state_size (" + std::to_string(info.ssm_d_k) + ")");
  }
  if (info.ssm_n_v_heads % info.ssm_n_k_heads != 0) {
    r.fail(r.key("ssm.time_step_rank"), "(" + std::to_string(info.ssm_n_v_heads) + ") is not a multiple of group_count (" +
                                            std::to_string(info.ssm_n_k_heads) + ")");
  }
  info.ssm_d_v = inner / info.ssm_n_v_heads;
  const int32_t interval = r.opt_int("full_attention_interval", 4, 1, 4096);
  info.layer_is_recurrent.resize(static_cast<size_t>(info.n_layers));
  for (int32_t il = 0; il < info.n_layers; ++il) info.layer_is_recurrent[static_cast<size_t>(il)] = (il + 1) % interval != 0;
  info.attn_output_gate = true;
  if (info.arch == ModelArch::qwen3next) {
    info.ssm_grouped_heads = true;
    info.ssm_fused_beta_alpha = true;
    return;  // plain NEOX rope over rope.dimension_count dims
  }
  // Interleaved M-RoPE gives rotated pair s the section s % 3 (time, height, width) while s < 3 *
  // sections[s % 3]; a text token has one position in all three, so where every pair is covered the
  // rotation is NEOX rope. A pair left to the fourth section would turn by position 0: refused.
  const std::string k = r.key("rope.dimension_sections");
  std::vector<int64_t> sections(4, 0);
  if (r.file().find(k) != nullptr) sections = r.file().get_int_array(k);
  if (sections.size() < 3) r.fail(k, "needs at least 3 values");
  for (int32_t pair = 0; pair < info.n_rot / 2; ++pair) {
    if (pair >= 3 * sections[static_cast<size_t>(pair % 3)]) {
      r.fail(k, "leaves rotated pair " + std::to_string(pair) + " outside the time/height/width sections, which Loom does not support");
    }
  }
}

}  // namespace

std::string arch_list() { return "llama, qwen2, qwen2vl, qwen2moe, qwen3, qwen3vl, qwen3moe, qwen35, qwen35moe, qwen3next, gpt-oss, gemma2, gemma3, gemma4, olmo2, granite, smollm3, phi3, mistral3"; }

ModelInfo read_model_info(const gguf::GgufFile& file) {
  ModelInfo info;
  const auto arch = file.get_string("general.architecture");
  if (!arch) throw Error(file.label() + ": metadata 'general.architecture' is missing (not a model file?)");
  info.arch_name = *arch;
  if (*arch == "llama") {
    info.arch = ModelArch::llama;
  } else if (*arch == "qwen2") {
    info.arch = ModelArch::qwen2;
  } else if (*arch == "qwen2vl") {
    info.arch = ModelArch::qwen2;  // Qwen2's blocks; M-RoPE positions (read below)
    info.mrope = true;
  } else if (*arch == "qwen2moe") {
    info.arch = ModelArch::qwen2moe;
  } else if (*arch == "qwen3") {
    info.arch = ModelArch::qwen3;
  } else if (*arch == "qwen3vl") {
    info.arch = ModelArch::qwen3;  // Qwen3's blocks; interleaved M-RoPE and deepstack rows (read below)
    info.mrope = true;
    info.mrope_interleaved = true;
  } else if (*arch == "qwen3moe") {
    info.arch = ModelArch::qwen3moe;
  } else if (*arch == "qwen35") {
    info.arch = ModelArch::qwen35;
  } else if (*arch == "qwen35moe") {
    info.arch = ModelArch::qwen35moe;
  } else if (*arch == "qwen3next") {
    info.arch = ModelArch::qwen3next;
  } else if (*arch == "gpt-oss") {
    info.arch = ModelArch::gpt_oss;
  } else if (*arch == "gemma2") {
    info.arch = ModelArch::gemma2;
  } else if (*arch == "gemma3") {
    info.arch = ModelArch::gemma3;
  } else if (*arch == "gemma4") {
    info.arch = ModelArch::gemma4;
  } else if (*arch == "olmo2") {
    info.arch = ModelArch::olmo2;
  } else if (*arch == "granite") {
    info.arch = ModelArch::granite;
  } else if (*arch == "smollm3") {
    info.arch = ModelArch::smollm3;
  } else if (*arch == "phi3") {
    info.arch = ModelArch::phi3;
  } else if (*arch == "mistral3") {
    info.arch = ModelArch::mistral3;
  } else if (*arch == "bert" || *arch == "nomic-bert") {
    throw Error(file.label() + ": '" + *arch + "' is an embedding model (a text encoder), not a generative one: `loom serve` serves it at "
                "POST /v1/embeddings (or /v1/rerank)");
  } else {
    throw Error(file.label() + ": architecture '" + *arch + "' is not supported (supported: " + arch_list() + ")");
  }
  info.name = file.get_string("general.name").value_or("");

  const Reader r(file, *arch);
  info.n_layers = r.need_int("block_count", 1, 4096);
  info.dim = r.need_int("embedding_length", 1, 1 << 20);
  info.n_heads = r.need_int("attention.head_count", 1, 4096);
  const std::vector<int32_t> kv_heads = r.per_layer("attention.head_count_kv", info.n_layers, info.n_heads, 1, info.n_heads);
  for (int32_t n_kv : kv_heads) {
    if (info.n_heads % n_kv != 0) {
      r.fail(r.key("attention.head_count_kv"), "(" + std::to_string(n_kv) + ") does not divide head_count (" +
                                                   std::to_string(info.n_heads) + ")");
    }
  }
  info.n_kv_heads = *std::max_element(kv_heads.begin(), kv_heads.end());
  const int64_t default_head_dim = info.dim % info.n_heads == 0 ? info.dim / info.n_heads : 0;
  info.head_dim = r.opt_int("attention.key_length", default_head_dim, 1, 4096);
  if (info.head_dim == 0) r.fail(r.key("attention.key_length"), "is missing and dim is not a multiple of head_count");
  const int32_t v_head_dim = r.opt_int("attention.value_length", info.head_dim, 1, 4096);
  if (v_head_dim != info.head_dim) {
    r.fail(r.key("attention.value_length"), "(" + std::to_string(v_head_dim) + ") differs from key_length (" +
                                                std::to_string(info.head_dim) + "), which Loom does not support");
  }
  if (info.head_dim % 2 != 0) r.fail(r.key("attention.key_length"), "must be even for rotary embeddings");
  const std::vector<int32_t> ff = r.per_layer("feed_forward_length", info.n_layers, -1, 1, 1 << 22);
  info.ff_dim = *std::max_element(ff.begin(), ff.end());
  info.n_ctx_train = r.opt_int("context_length", 2048, 1, 1 << 30);
  info.n_rot = r.opt_int("rope.dimension_count", info.head_dim, 2, info.head_dim);
  if (info.n_rot % 2 != 0) r.fail(r.key("rope.dimension_count"), "must be even");
  if (info.mrope) {
    // llama.cpp's qwen2vl: [time, height, width, extra] pairs per section (Qwen2-VL: 16, 24, 24, 0).
    const std::string k = r.key("rope.dimension_sections");
    if (file.find(k) == nullptr) r.fail(k, "is missing (M-RoPE needs its sections)");
    const std::vector<int64_t> sections = file.get_int_array(k);
    if (sections.size() < 3 || sections.size() > 4) r.fail(k, "needs 3 or 4 values");
    int64_t total = 0;
    for (size_t i = 0; i < sections.size(); ++i) {
      if (sections[i] < 0 || sections[i] > info.n_rot) r.fail(k, "holds a section outside 0.." + std::to_string(info.n_rot));
      info.rope_sections[i] = static_cast<int32_t>(sections[i]);
      total += sections[i];
    }
    if (total <= 0) r.fail(k, "must hold at least one pair");
  }
  if (info.mrope_interleaved) {
    // Qwen3-VL: an image row carries its input and one more row of values per deepstack layer, each
    // added to the output of layers 0, 1, ... (llama.cpp's n_deepstack_layers; text rows add zeros).
    info.n_deepstack = r.opt_int("n_deepstack_layers", 0, 0, info.n_layers - 1);
  }
  // Sliding-window layers may have their own head size and rotary dims (llama.cpp reads these for
  // every family; Gemma 4 sets them).
  const int32_t head_dim_local = r.opt_int("attention.key_length_swa", info.head_dim, 2, 4096);
  if (r.opt_int("attention.value_length_swa", head_dim_local, 1, 4096) != head_dim_local || head_dim_local % 2 != 0) {
    r.fail(r.key("attention.value_length_swa"), "must equal key_length_swa, which must be even");
  }
  info.n_rot_local = r.opt_int("rope.dimension_count_swa", info.n_rot, 2, head_dim_local);
  if (info.n_rot_local % 2 != 0) r.fail(r.key("rope.dimension_count_swa"), "must be even");
  int32_t first_shared_kv = info.n_layers;  // Gemma 4: later layers reuse earlier layers' KV

  const bool gemma3 = info.arch == ModelArch::gemma3;
  const bool gemma = gemma3 || info.arch == ModelArch::gemma2;
  info.rms_eps = r.opt_float("attention.layer_norm_rms_epsilon").value_or(gemma ? 1e-6f : 1e-5f);
  if (!(info.rms_eps > 0.0f)) r.fail(r.key("attention.layer_norm_rms_epsilon"), "must be > 0");
  info.rope_freq_base = r.opt_float("rope.freq_base").value_or(gemma3 ? 1e6f : 10000.0f);
  if (!(info.rope_freq_base > 0.0f)) r.fail(r.key("rope.freq_base"), "must be > 0");

  read_rope_scaling(r, info);
  info.rope_freq_base_local = info.rope_freq_base;
  info.rope_freq_scale_local = info.rope_freq_scale;
  info.layer_is_local.assign(static_cast<size_t>(info.n_layers), false);
  info.layer_uses_rope.assign(static_cast<size_t>(info.n_layers), true);
  info.attention_scale = 1.0f / std::sqrt(static_cast<float>(info.head_dim));

  switch (info.arch) {
    case ModelArch::llama:
      info.rope_mode = LOOM_ROPE_NORMAL;
      break;
    case ModelArch::mistral3:
      info.rope_mode = LOOM_ROPE_NORMAL;
      info.attn_temperature_scale = r.opt_float("attention.temperature_scale").value_or(0.0f);
      if (info.attn_temperature_scale < 0.0f) r.fail(r.key("attention.temperature_scale"), "must be >= 0");
      break;
    case ModelArch::qwen2:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.qkv_bias = true;
      break;
    case ModelArch::qwen3:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.qk_norm = true;
      break;
    case ModelArch::qwen2moe:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.qkv_bias = true;
      read_experts(r, info);
      info.shared_expert_ff_dim = r.opt_int("expert_shared_feed_forward_length", info.ff_dim, 1, 1 << 22);
      break;
    case ModelArch::qwen3moe:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.qk_norm = true;
      read_experts(r, info);
      info.expert_weights_norm = true;
      break;
    case ModelArch::qwen35:
    case ModelArch::qwen35moe:
    case ModelArch::qwen3next:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.qk_norm = true;
      info.ffn_norm_name = "post_attention_norm";
      read_linear_attention(r, info);
      if (info.arch != ModelArch::qwen35) {
        read_experts(r, info);
        info.expert_weights_norm = true;
        info.shared_expert_ff_dim = r.opt_int("expert_shared_feed_forward_length", info.ff_dim, 1, 1 << 22);
      }
      break;
    case ModelArch::phi3:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.fused_qkv = file.find_tensor("blk.0.attn_qkv.weight") != nullptr;
      info.fused_gate_up = true;
      info.rope_long_short = file.find_tensor("rope_factors_long.weight") != nullptr;
      if (info.rope_long_short != (file.find_tensor("rope_factors_short.weight") != nullptr)) {
        throw Error(file.label() + ": LongRoPE needs both 'rope_factors_long.weight' and 'rope_factors_short.weight'");
      }
      break;
    case ModelArch::smollm3:
      info.rope_mode = LOOM_ROPE_NORMAL;
      for (int32_t il = 0; il < info.n_layers; ++il) info.layer_uses_rope[static_cast<size_t>(il)] = (il + 1) % 4 != 0;
      break;
    case ModelArch::olmo2:
      info.rope_mode = LOOM_ROPE_NEOX;
      info.pre_norms = false;
      info.post_norms = true;
      info.qk_norm_full = true;
      if (r.opt_int("attention.sliding_window", 0, 0, 1 << 30) > 0) {
        r.fail(r.key("attention.sliding_window"), "is set: OLMo 3's sliding-window layers are not supported yet");
      }
      break;
    case ModelArch::granite: {
      info.rope_mode = LOOM_ROPE_NORMAL;
      const auto logit_scale = r.opt_float("logit_scale");
      if (!logit_scale) r.fail(r.key("logit_scale"), "is missing");
      if (!(*logit_scale > 0.0f)) r.fail(r.key("logit_scale"), "must be > 0");
      info.logit_scale = 1.0f / *logit_scale;
      if (const auto v = r.opt_float("embedding_scale"); v && *v != 0.0f) info.embedding_scale = *v;
      if (const auto v = r.opt_float("residual_scale"); v && *v != 0.0f) info.residual_scale = *v;
      break;
    }
    case ModelArch::gpt_oss: {
      info.rope_mode = LOOM_ROPE_NEOX;
      read_experts(r, info);
      info.expert_gating = LOOM_MOE_GATING_SOFTMAX_CHOSEN;
      info.expert_biases = true;
      info.ffn_activation = LOOM_ACTIVATION_SWIGLU_OAI;
      info.attn_sinks = true;
      info.ffn_norm_name = "post_attention_norm";
      info.sliding_window = static_cast<uint32_t>(r.need_int("attention.sliding_window", 1, 1 << 30));
      const int32_t pattern = r.opt_int("attention.sliding_window_pattern", 2, 1, 4096);
      for (int32_t il = 0; il < info.n_layers; ++il) info.layer_is_local[static_cast<size_t>(il)] = il % pattern < pattern - 1;
      info.rope_freq_base_local = r.opt_float("rope.freq_base_swa").value_or(info.rope_freq_base);
      break;
    }
    case ModelArch::gemma2: {
      info.rope_mode = LOOM_ROPE_NEOX;
      info.ffn_activation = LOOM_ACTIVATION_GELU_TANH;
      info.post_norms = true;
      info.embedding_scale = std::sqrt(static_cast<float>(info.dim));
      info.sliding_window = static_cast<uint32_t>(r.opt_int("attention.sliding_window", 4096, 0, 1 << 30));
      const int32_t pattern = r.opt_int("attention.sliding_window_pattern", 2, 1, 4096);
      if (info.sliding_window > 0) {
        for (int32_t il = 0; il < info.n_layers; ++il) info.layer_is_local[static_cast<size_t>(il)] = il % pattern < pattern - 1;
      }
      info.rope_freq_base_local = r.opt_float("rope.freq_base_swa").value_or(info.rope_freq_base);
      info.attn_softcap = r.opt_float("attn_logit_softcapping").value_or(50.0f);
      info.final_softcap = r.opt_float("final_logit_softcapping").value_or(30.0f);
      if (info.attn_softcap < 0.0f || info.final_softcap < 0.0f) r.fail(r.key("attn_logit_softcapping"), "must be >= 0");
      // gemma_pytorch's query_pre_attn_scalar: dim / n_heads for the 27B (46 layers), head_dim otherwise.
      const float pre_attn = info.n_layers == 46 ? static_cast<float>(info.dim) / static_cast<float>(info.n_heads)
                                                 : static_cast<float>(info.head_dim);
      info.attention_scale = 1.0f / std::sqrt(pre_attn);
      break;
    }
    case ModelArch::gemma4: {
      // llama.cpp's gemma4.cpp: GELU gate, per-head q/k norms and a weightless v norm, post norms,
      // q·k unscaled (the norms bound it), the layer pattern as a bool array, sliding layers with
      // their own rope base, global layers with proportional rope (rope_freqs), the last
      // shared_kv_layers attending over the KV of the last local/global layer before them.
      info.rope_mode = LOOM_ROPE_NEOX;
      info.ffn_activation = LOOM_ACTIVATION_GELU_TANH;
      info.qk_norm = true;
      info.v_norm = true;
      info.post_norms = true;
      info.freq_factors_global_only = true;
      info.layer_output_scale = file.find_tensor("blk.0.layer_output_scale.weight") != nullptr;
      info.embedding_scale = std::sqrt(static_cast<float>(info.dim));
      info.attention_scale = 1.0f;
      info.sliding_window = static_cast<uint32_t>(r.need_int("attention.sliding_window", 0, 1 << 30));
      const std::vector<bool> pattern = file.get_bool_array(r.key("attention.sliding_window_pattern"));
      if (pattern.size() != static_cast<size_t>(info.n_layers)) {
        r.fail(r.key("attention.sliding_window_pattern"), "must be a bool array of " + std::to_string(info.n_layers) + " layers");
      }
      if (info.sliding_window > 0) {
        for (int32_t il = 0; il < info.n_layers; ++il) info.layer_is_local[static_cast<size_t>(il)] = pattern[static_cast<size_t>(il)];
      }
      info.rope_freq_base_local = r.opt_float("rope.freq_base_swa").value_or(10000.0f);
      info.rope_freq_scale_local = 1.0f;
      info.final_softcap = r.opt_float("final_logit_softcapping").value_or(30.0f);
      info.per_layer_dim = r.need_int("embedding_length_per_layer_input", 0, 1 << 16);
      first_shared_kv = info.n_layers - r.opt_int("attention.shared_kv_layers", 0, 0, info.n_layers);
      for (int32_t il = 0; il < info.n_layers; ++il) {
        if (file.find_tensor("blk." + std::to_string(il) + ".ffn_gate_inp.weight") != nullptr) {
          throw Error(file.label() + ": gemma4 layer " + std::to_string(il) +
                      " is a mixture-of-experts layer (blk." + std::to_string(il) +
                      ".ffn_gate_inp.weight), which Loom does not run yet; the dense Gemma 4 models (E2B, E4B, 31B) load");
        }
      }
      break;
    }
    case ModelArch::gemma3: {
      info.rope_mode = LOOM_ROPE_NEOX;
      info.ffn_activation = LOOM_ACTIVATION_GELU_TANH;
      info.qk_norm = true;
      info.post_norms = true;
      info.embedding_scale = std::sqrt(static_cast<float>(info.dim));
      info.sliding_window = static_cast<uint32_t>(r.opt_int("attention.sliding_window", 0, 0, 1 << 30));
      info.rope_freq_base_local = 10000.0f;
      info.rope_freq_scale_local = 1.0f;
      if (info.sliding_window > 0) {
        for (int32_t il = 0; il < info.n_layers; ++il) info.layer_is_local[static_cast<size_t>(il)] = (il + 1) % 6 != 0;
      }
      // gemma_pytorch's query_pre_attn_scalar: dim / n_heads for the 27B, head_dim otherwise.
      const float pre_attn = info.n_layers == 62 ? static_cast<float>(info.dim) / static_cast<float>(info.n_heads)
                                                 : static_cast<float>(info.head_dim);
      info.attention_scale = 1.0f / std::sqrt(pre_attn);
      break;
    }
  }
  for (int32_t il = 0; il < info.n_layers; ++il) {
    const size_t i = static_cast<size_t>(il);
    const bool local = info.layer_is_local[i];
    info.layers.push_back({local ? head_dim_local : info.head_dim, kv_heads[i], local ? info.n_rot_local : info.n_rot, ff[i], il});
  }
  if (first_shared_kv < info.n_layers) {
    // llama.cpp's rule: a shared layer reads the last layer with its own KV of the same kind, which
    // it takes to be first_shared - 1 for global layers and first_shared - 2 for local ones.
    for (int32_t il = first_shared_kv; il < info.n_layers; ++il) {
      const int32_t source = first_shared_kv - (info.layer_is_local[static_cast<size_t>(il)] ? 2 : 1);
      if (source < 0 || info.layer_is_local[static_cast<size_t>(source)] != info.layer_is_local[static_cast<size_t>(il)] ||
          info.layer(source).head_dim != info.layer(il).head_dim || info.layer(source).n_kv_heads != info.layer(il).n_kv_heads) {
        r.fail(r.key("attention.shared_kv_layers"), "makes layer " + std::to_string(il) + " share the KV of layer " +
                                                        std::to_string(source) + ", which is not a layer of the same kind and shape");
      }
      info.layers[static_cast<size_t>(il)].kv_source = source;
    }
  }
  if (const auto scale = r.opt_float("attention.scale"); scale && *scale > 0.0f) info.attention_scale = *scale;
  // llama.cpp's rope scales the rotated q and k by its magnitude factor; only their product is used.
  info.attention_scale *= info.rope_magnitude * info.rope_magnitude;

  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) throw Error(file.label() + ": tensor 'token_embd.weight' is missing");
  if (embd->dims.size() != 2 || embd->dims[0] != info.dim) {
    throw Error(file.label() + ": tensor 'token_embd.weight' must be [" + std::to_string(info.dim) + ", n_vocab]");
  }
  info.n_vocab = static_cast<int32_t>(embd->dims[1]);
  info.tied_output = file.find_tensor("output.weight") == nullptr;
  // Llama 3.1+ (rope type llama3): the converter stores each rotated pair's frequency divisor.
  info.rope_freq_factors = file.find_tensor("rope_freqs.weight") != nullptr;
  return info;
}

}  // namespace loom
