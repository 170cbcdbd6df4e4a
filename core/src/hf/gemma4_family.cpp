#include "hf/gemma4_family.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "hf/json_file.h"

namespace loom::hf {

namespace {

using nlohmann::json;
using Kind = ConfigKey::Kind;
using Rows = TensorName::Rows;

// The layer plan config.json describes, in the terms of transformers' Gemma4TextConfig: which layers
// are sliding, each kind's head size and KV heads (full layers: global_head_dim and, with
// attention_k_eq_v, num_global_key_value_heads, or a per_layer_config that overrides them), and the
// first layer that reads an earlier layer's KV.
struct Gemma4Layout {
  std::vector<bool> sliding;
  int64_t head_dim_swa = 0, head_dim_full = 0, kv_heads_swa = 0, kv_heads_full = 0, first_shared = 0;
};

int64_t number_or(const json& object, const char* key, int64_t fallback) {
  return object.contains(key) && object[key].is_number_integer() ? object[key].get<int64_t>() : fallback;
}

Gemma4Layout layout_of(const json& config, const std::string& config_path) {
  Gemma4Layout l;
  const int64_t n_layers = number_or(config, "num_hidden_layers", 0);
  if (n_layers <= 0) throw Error(config_path + ": num_hidden_layers is missing or not positive");
  const json types = config.value("layer_types", json());
  if (types.is_array()) {
    if (int64_t(types.size()) != n_layers) throw Error(config_path + ": layer_types does not name num_hidden_layers layers");
    for (const json& t : types) {
      if (t != "sliding_attention" && t != "full_attention")
        throw Error(config_path + ": layer_types holds '" + t.dump() + "' (Gemma 4 has sliding_attention and full_attention layers)");
      l.sliding.push_back(t == "sliding_attention");
    }
  } else {
    for (int64_t il = 0; il < n_layers; il++) l.sliding.push_back((il + 1) % 6 != 0);  // transformers' default, 5:1
  }
  l.sliding.back() = false;  // transformers forces the last layer to full attention

  l.head_dim_swa = number_or(config, "head_dim", 256);
  l.kv_heads_swa = number_or(config, "num_key_value_heads", 4);
  l.head_dim_full = number_or(config, "global_head_dim", 512);
  l.kv_heads_full = config.value("attention_k_eq_v", false) ? number_or(config, "num_global_key_value_heads", l.kv_heads_swa) : l.kv_heads_swa;
  // transformers 5 saves the overrides per layer instead; Loom's gemma4 (as llama.cpp's) has one head
  // size and KV head count per kind of layer.
  const json per_layer = config.value("per_layer_config", json());
  if (per_layer.is_object()) {
    bool first_full = true;
    for (const auto& [index, overrides] : per_layer.items()) {
      const size_t il = size_t(std::stoll(index));
      if (il >= l.sliding.size() || !overrides.is_object()) throw Error(config_path + ": per_layer_config names layer " + index + ", which is not a layer");
      const int64_t hd = number_or(overrides, "head_dim", l.sliding[il] ? l.head_dim_swa : l.head_dim_full);
      const int64_t kv = number_or(overrides, "num_key_value_heads", l.sliding[il] ? l.kv_heads_swa : l.kv_heads_full);
      if (l.sliding[il]) {
        if (hd != l.head_dim_swa || kv != l.kv_heads_swa)
          throw Error(config_path + ": per_layer_config gives sliding layer " + index + " its own head size or KV heads (Loom runs one shape per kind of layer)");
      } else if (first_full) {
        l.head_dim_full = hd, l.kv_heads_full = kv, first_full = false;
      } else if (hd != l.head_dim_full || kv != l.kv_heads_full) {
        throw Error(config_path + ": per_layer_config gives full layer " + index + " another head size or KV heads than the others (Loom runs one shape per kind of layer)");
      }
    }
  }

  const int64_t shared = number_or(config, "num_kv_shared_layers", 0);
  if (shared < 0 || shared >= n_layers) throw Error(config_path + ": num_kv_shared_layers must be 0 .. num_hidden_layers - 1");
  l.first_shared = n_layers - shared;
  // transformers: a shared layer reads the last layer of its kind before first_shared; llama.cpp's
  // gemma4 reads first_shared - 1 for full layers and first_shared - 2 for sliding ones.
  for (int64_t il = l.first_shared; il < n_layers; il++) {
    int64_t hf_source = l.first_shared - 1;
    while (hf_source >= 0 && l.sliding[size_t(hf_source)] != l.sliding[size_t(il)]) hf_source--;
    const int64_t llama_source = l.first_shared - (l.sliding[size_t(il)] ? 2 : 1);
    if (hf_source != llama_source)
      throw Error(config_path + ": layer " + std::to_string(il) + " shares the KV of layer " + std::to_string(hf_source) +
                  ", where Loom's gemma4 (as llama.cpp's) reads layer " + std::to_string(llama_source) +
                  " (num_kv_shared_layers must start after a sliding layer and a full layer, in that order)");
  }
  return l;
}

// rope_parameters per kind of layer (transformers' defaults when absent): the full layers' proportional
// rope, the sliding layers' plain one.
json rope_of(const json& config, const char* layer_type) {
  const json all = config.value("rope_parameters", json());
  if (all.is_object() && all.contains(layer_type) && all[layer_type].is_object()) return all[layer_type];
  if (std::string_view(layer_type) == "full_attention")
    return json{{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}};
  return json{{"rope_type", "default"}, {"rope_theta", 10000.0}};
}

void gemma4_extra(const std::filesystem::path& dir, const json& config, const std::string& arch, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string(), a = arch + ".";
  const std::string act = config.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") throw Error(config_path + ": hidden_activation '" + act + "' (Gemma 4 runs with gelu_pytorch_tanh)");
  if (config.value("enable_moe_block", false))
    throw Error(config_path + ": enable_moe_block: Gemma 4's mixture-of-experts layers (26B-A4B) are not run by Loom yet; the dense Gemma 4 models (E2B, E4B, 31B) load");
  if (!config.value("use_bidirectional_attention", json()).is_null())
    throw Error(config_path + ": use_bidirectional_attention is set (Loom runs Gemma 4 as a causal decoder)");
  if (config.value("attention_bias", false)) throw Error(config_path + ": attention_bias is set, which Gemma 4 does not use");
  if (config.value("final_logit_softcapping", json()).is_null())
    throw Error(config_path + ": final_logit_softcapping is null (Loom's gemma4, as llama.cpp's, caps the logits at 30 when a file does not say)");
  const int64_t ple = number_or(config, "hidden_size_per_layer_input", 256);
  if (ple > 0 && number_or(config, "vocab_size_per_layer_input", 262144) != number_or(config, "vocab_size", 262144))
    throw Error(config_path + ": vocab_size_per_layer_input differs from vocab_size (Loom's per-layer embeddings have a row per token)");

  const Gemma4Layout l = layout_of(config, config_path);
  const int64_t n_layers = int64_t(l.sliding.size());
  std::vector<int32_t> kv_heads, ff;
  const int64_t n_ff = number_or(config, "intermediate_size", 9216);
  const bool double_wide = config.value("use_double_wide_mlp", false);
  for (int64_t il = 0; il < n_layers; il++) {
    kv_heads.push_back(int32_t(l.sliding[size_t(il)] ? l.kv_heads_swa : l.kv_heads_full));
    ff.push_back(int32_t(double_wide && il >= l.first_shared ? 2 * n_ff : n_ff));
  }
  writer.set_int32_array(a + "feed_forward_length", ff);
  writer.set_int32_array(a + "attention.head_count_kv", kv_heads);
  writer.set_uint32(a + "attention.key_length", uint32_t(l.head_dim_full));
  writer.set_uint32(a + "attention.value_length", uint32_t(l.head_dim_full));
  writer.set_uint32(a + "attention.key_length_swa", uint32_t(l.head_dim_swa));
  writer.set_uint32(a + "attention.value_length_swa", uint32_t(l.head_dim_swa));
  writer.set_bool_array(a + "attention.sliding_window_pattern", l.sliding);
  writer.set_uint32(a + "attention.shared_kv_layers", uint32_t(n_layers - l.first_shared));
  writer.set_uint32(a + "embedding_length_per_layer_input", uint32_t(ple));

  const json full = rope_of(config, "full_attention"), swa = rope_of(config, "sliding_attention");
  if (full.value("rope_type", std::string()) != "proportional" || full.value("factor", 1.0) != 1.0)
    throw Error(config_path + ": rope_parameters.full_attention is not unscaled proportional rope (what Gemma 4's full layers use)");
  if (swa.value("rope_type", std::string("default")) != "default")
    throw Error(config_path + ": rope_parameters.sliding_attention is '" + swa.value("rope_type", std::string()) + "' rope (Gemma 4's sliding layers use default rope)");
  writer.set_float32(a + "rope.freq_base", full.value("rope_theta", 1000000.0f));
  writer.set_float32(a + "rope.freq_base_swa", swa.value("rope_theta", 10000.0f));
  writer.set_uint32(a + "rope.dimension_count", uint32_t(l.head_dim_full));  // the unrotated pairs are rope_freqs'
  writer.set_uint32(a + "rope.dimension_count_swa", uint32_t(double(l.head_dim_swa) * swa.value("partial_rotary_factor", 1.0)));
}

// Proportional rope: the full layers rotate the first partial_rotary_factor of their pairs at the
// frequencies of a head_dim-wide rope; the converter keeps the rest still with a divisor of 1e30.
std::vector<GeneratedTensor> gemma4_rope_freqs(const json& config) {
  const Gemma4Layout l = layout_of(config, "config.json");
  const int64_t rotated = int64_t(double(l.head_dim_full) * rope_of(config, "full_attention").value("partial_rotary_factor", 1.0) / 2);
  GeneratedTensor t{"rope_freqs.weight", std::vector<float>(size_t(l.head_dim_full / 2), 1e30f)};
  for (int64_t i = 0; i < rotated && i < l.head_dim_full / 2; i++) t.values[size_t(i)] = 1.0f;
  return {t};
}

// Layers that read an earlier layer's KV publish no k/v projections (or publish ones transformers
// ignores); full layers with attention_k_eq_v no v_proj: hence the optional rows. (A function, not a
// global: hf_families.cpp's table copies it during static initialisation.)
std::vector<TensorName> gemma4_tensors() {
  return {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight", false},
      {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight", false},
      {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight", false},
      {"model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
      {"model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
      {"model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight", false},
      {"model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight", false},
      {"model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
      {"model.layers.{}.self_attn.q_norm.weight", "blk.{}.attn_q_norm.weight"},
      {"model.layers.{}.self_attn.k_norm.weight", "blk.{}.attn_k_norm.weight", false},
      {"model.layers.{}.post_attention_layernorm.weight", "blk.{}.post_attention_norm.weight"},
      {"model.layers.{}.pre_feedforward_layernorm.weight", "blk.{}.ffn_norm.weight"},
      {"model.layers.{}.post_feedforward_layernorm.weight", "blk.{}.post_ffw_norm.weight"},
      {"model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
      {"model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
      {"model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"},
      {"model.layers.{}.per_layer_input_gate.weight", "blk.{}.inp_gate.weight", false},
      {"model.layers.{}.per_layer_projection.weight", "blk.{}.proj.weight", false},
      {"model.layers.{}.post_per_layer_input_norm.weight", "blk.{}.post_norm.weight", false},
      {"model.layers.{}.layer_scalar", "blk.{}.layer_output_scale.weight", false},
  };
}

}  // namespace

const char* const kGemma4TextDefaults = R"({
  "vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "attention_bias": false,
  "sliding_window": 512, "final_logit_softcapping": null, "use_bidirectional_attention": null,
  "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256, "attention_k_eq_v": false,
  "num_kv_shared_layers": 0, "enable_moe_block": false, "use_double_wide_mlp": false})";

Family gemma4_family() {
  Family f{"gemma4_text", "gemma4", "num_hidden_layers", nullptr, nullptr,
           {{"max_position_embeddings", "context_length", Kind::u32, false, 131072.0},
            {"hidden_size", "embedding_length"},
            {"num_hidden_layers", "block_count"},
            {"num_attention_heads", "attention.head_count"},
            {"rms_norm_eps", "attention.layer_norm_rms_epsilon", Kind::f32},
            {"sliding_window", "attention.sliding_window"},
            {"final_logit_softcapping", "final_logit_softcapping", Kind::f32, false}},
           gemma4_tensors(), TokenizerKind::gemma4, gemma4_extra, gemma4_rope_freqs};
  return f;
}

}  // namespace loom::hf
