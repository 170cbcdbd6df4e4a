// The families Loom reads from Hugging Face folders, as llama.cpp's converter (conversion/*.py) maps them.

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string_view>

#include "common/error.h"
#include "hf/json_file.h"
#include "hf/gemma4_family.h"
#include "hf/hf_family.h"
#include "hf/linear_attention.h"

namespace loom::hf {

namespace {

using nlohmann::json;

// sentence-transformers' pooling (modules.json -> its Pooling module's config.json), as the converter
// reads it: 1 mean, 2 cls, 3 last; 2 (the [CLS] row) without one.
uint32_t sentence_transformers_pooling(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "modules.json")) return 2;
  const json modules = read_json_file(dir / "modules.json");
  for (const json& module : modules) {
    if (!module.is_object() || !module.value("type", std::string()).ends_with("Pooling")) continue;
    const std::filesystem::path path = dir / module.value("path", std::string()) / "config.json";
    const json pooling = read_json_file(path);
    try {
      if (pooling.value("pooling_mode_mean_tokens", false)) return 1;
      if (pooling.value("pooling_mode_cls_token", false)) return 2;
      if (pooling.value("pooling_mode_lasttoken", false)) return 3;
      const std::string mode = pooling.value("pooling_mode", std::string());
      if (mode == "mean") return 1;
      if (mode == "cls") return 2;
      if (mode == "lasttoken") return 3;
    } catch (const json::type_error& e) {
      throw Error(path.string() + ": " + e.what());
    }
    throw Error(path.string() + ": a pooling mode Loom does not run (mean, cls, lasttoken)");
  }
  return 2;
}

void bert_extra(const std::filesystem::path& dir, const json& config, const std::string&, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  if (config.value("hidden_act", std::string("gelu")) != "gelu")
    throw Error(config_path + ": hidden_act '" + config.value("hidden_act", std::string()) + "' (Loom runs bert with gelu)");
  if (config.value("position_embedding_type", std::string("absolute")) != "absolute")
    throw Error(config_path + ": position_embedding_type '" + config.value("position_embedding_type", std::string()) + "' (Loom runs bert with absolute positions)");
  if (config.value("model_type", std::string()) == "xlm-roberta") {
    const int64_t positions = config.value("max_position_embeddings", int64_t(0)), skipped = config.value("pad_token_id", int64_t(1)) + 1;
    if (positions <= skipped) throw Error(config_path + ": max_position_embeddings leaves no position past pad_token_id");
    writer.set_uint32("bert.context_length", uint32_t(positions - skipped));
    writer.set_uint32("tokenizer.ggml.token_type_count", uint32_t(config.value("type_vocab_size", int64_t(1))));
  }
  writer.set_bool("bert.attention.causal", false);
  writer.set_uint32("bert.pooling_type", sentence_transformers_pooling(dir));
}

// rope_scaling (or transformers 5's rope_parameters, which also holds rope_theta) as the converter
// writes it: plain rope, linear interpolation, or YaRN with its original context.
json rope_parameters(const json& config) {
  return config.contains("rope_parameters") ? config["rope_parameters"] : config.value("rope_scaling", json());
}

// Its kind: "rope_type", or "type" in older configs.
std::string rope_type(const json& rope, const std::string& fallback) { return rope.value("rope_type", rope.value("type", fallback)); }

// Llama 3.1's rope scaling: its factors as the rope_freqs tensor llama.cpp's converter computes
// (LlamaModel.generate_extra_tensors), step by step in float32 as torch does there.
std::vector<GeneratedTensor> llama3_rope_freqs(const json& config) {
  const json rope = rope_parameters(config);
  if (!rope.is_object() || rope_type(rope, "") != "llama3") return {};
  const double base = rope.value("rope_theta", config.value("rope_theta", 10000.0));
  const int64_t dim = config.contains("head_dim") && config["head_dim"].is_number_integer()
                          ? config["head_dim"].get<int64_t>()
                          : config.value("hidden_size", int64_t(0)) / std::max<int64_t>(1, config.value("num_attention_heads", int64_t(1)));
  const double factor = rope.value("factor", 8.0), low = rope.value("low_freq_factor", 1.0), high = rope.value("high_freq_factor", 4.0);
  const double old_context = rope.value("original_max_position_embeddings", 8192.0);
  const float low_wavelen = float(old_context / low), high_wavelen = float(old_context / high);
  GeneratedTensor t{"rope_freqs.weight", {}};
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(float(base), float(i) / float(dim));
    const float wavelen = float(2.0 * std::numbers::pi) / freq;
    if (wavelen < high_wavelen) {
      t.values.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      t.values.push_back(float(factor));
    } else {
      const float smooth = (float(old_context) / wavelen - float(low)) / float(high - low);
      t.values.push_back(1.0f / ((1.0f - smooth) / float(factor) + smooth));
    }
  }
  return {t};
}

void add_rope_scaling(const json& config, const std::string& config_path, const std::string& arch, gguf::GgufWriter& writer) {
  const json rope = rope_parameters(config);
  if (rope.is_null()) return;
  if (!rope.is_object()) throw Error(config_path + ": rope_scaling is neither null nor an object");
  if (rope.contains("rope_theta") && rope["rope_theta"].is_number() && !writer.has_key(arch + ".rope.freq_base"))
    writer.set_float32(arch + ".rope.freq_base", rope["rope_theta"].get<float>());
  const std::string type = rope_type(rope, "default");
  // llama3's factors are a tensor (llama3_rope_freqs), for the families whose converter computes it.
  if (type == "default" || (type == "llama3" && (arch == "llama" || arch == "smollm3" || arch == "granite"))) return;
  const auto number = [&](const char* key) {
    if (!rope.contains(key) || !rope[key].is_number()) throw Error(config_path + ": rope scaling '" + type + "' without a number '" + key + "'");
    return rope[key].get<float>();
  };
  if (type == "linear") {
    writer.set_string(arch + ".rope.scaling.type", "linear");
    writer.set_float32(arch + ".rope.scaling.factor", number("factor"));
  } else if (type == "yarn") {
    writer.set_string(arch + ".rope.scaling.type", "yarn");
    writer.set_float32(arch + ".rope.scaling.factor", number("factor"));
    writer.set_uint32(arch + ".rope.scaling.original_context_length", uint32_t(number("original_max_position_embeddings")));
    if (rope.contains("beta_fast")) writer.set_float32(arch + ".rope.scaling.yarn_beta_fast", number("beta_fast"));
    if (rope.contains("beta_slow")) writer.set_float32(arch + ".rope.scaling.yarn_beta_slow", number("beta_slow"));
  } else {
    throw Error(config_path + ": rope scaling '" + type + "' is not read from a Hugging Face folder yet (default, linear, yarn); convert with llama.cpp's convert_hf_to_gguf.py");
  }
}

// Llama-style decoders (llama, mistral, qwen2, qwen3): what the table cannot check.
void decoder_extra(const std::filesystem::path& dir, const json& config, const std::string& arch, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  const std::string act = config.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error(config_path + ": hidden_act '" + act + "' (Loom runs this family with silu)");
  add_rope_scaling(config, config_path, arch, writer);
  if (config.value("use_sliding_window", false))
    throw Error(config_path + ": use_sliding_window is true (Loom runs this family with full attention)");
  if (config.contains("sliding_window") && config["sliding_window"].is_number() && config.value("model_type", std::string()) == "olmo2")
    throw Error(config_path + ": sliding_window is set: OLMo 3's sliding-window layers are not read yet");
  if (config.contains("num_experts")) {
    // Loom's qwen3moe renormalises the chosen experts' weights and its qwen2moe does not, as llama.cpp's.
    const bool renormalises = config.value("model_type", std::string()) == "qwen3_moe";
    if (config.value("norm_topk_prob", renormalises) != renormalises)
      throw Error(config_path + ": norm_topk_prob is " + (renormalises ? "false" : "true") + ", which this family does not run");
    if (config.value("decoder_sparse_step", 1) != 1 || !config.value("mlp_only_layers", json::array()).empty())
      throw Error(config_path + ": decoder_sparse_step or mlp_only_layers makes some layers dense, which Loom does not run");
  }
  if (config.contains("no_rope_layers") && config["no_rope_layers"].is_array()) {
    // SmolLM3: 1 where a layer uses rope. Loom's smollm3 drops it in every fourth layer, as llama.cpp's does.
    const json& uses = config["no_rope_layers"];
    for (size_t il = 0; il < uses.size(); il++)
      if (!uses[il].is_number_integer() || (uses[il].get<int64_t>() != 0) != ((il + 1) % 4 != 0))
        throw Error(config_path + ": no_rope_layers differs from every fourth layer without rope (the only layout Loom runs)");
  }
}

using Kind = ConfigKey::Kind;
using Rows = TensorName::Rows;

// BERT and XLM-RoBERTa encoders (embeddings; llama.cpp's "bert" both). XLM-RoBERTa (multilingual E5,
// BGE-M3) reads a unigram tokenizer.json, and its position embeddings start after pad_token_id, as the
// converter's XLMRobertaModel cuts them (so its context is max_position_embeddings - pad_token_id - 1).
Family bert(const char* model_type, const char* prefix) {
  const bool roberta = std::string_view(model_type) == "xlm-roberta";
  std::vector<ConfigKey> keys = {{"hidden_size", "embedding_length"},
                                 {"num_hidden_layers", "block_count"},
                                 {"intermediate_size", "feed_forward_length"},
                                 {"num_attention_heads", "attention.head_count"},
                                 {"layer_norm_eps", "attention.layer_norm_epsilon", Kind::f32, false, 1e-12}};
  if (!roberta) keys.insert(keys.begin(), {"max_position_embeddings", "context_length"});
  return {model_type, "bert", "num_hidden_layers", nullptr, prefix, keys,
          {{"embeddings.word_embeddings.weight", "token_embd.weight"},
           {"embeddings.position_embeddings.weight", "position_embd.weight", true, roberta ? Rows::after_padding_positions : Rows::as_stored},
           {"embeddings.token_type_embeddings.weight", "token_types.weight"},
           {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
           {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
           {"encoder.layer.{}.attention.self.query.weight", "blk.{}.attn_q.weight"},
           {"encoder.layer.{}.attention.self.query.bias", "blk.{}.attn_q.bias"},
           {"encoder.layer.{}.attention.self.key.weight", "blk.{}.attn_k.weight"},
           {"encoder.layer.{}.attention.self.key.bias", "blk.{}.attn_k.bias"},
           {"encoder.layer.{}.attention.self.value.weight", "blk.{}.attn_v.weight"},
           {"encoder.layer.{}.attention.self.value.bias", "blk.{}.attn_v.bias"},
           {"encoder.layer.{}.attention.output.dense.weight", "blk.{}.attn_output.weight"},
           {"encoder.layer.{}.attention.output.dense.bias", "blk.{}.attn_output.bias"},
           {"encoder.layer.{}.attention.output.LayerNorm.weight", "blk.{}.attn_output_norm.weight"},
           {"encoder.layer.{}.attention.output.LayerNorm.bias", "blk.{}.attn_output_norm.bias"},
           {"encoder.layer.{}.intermediate.dense.weight", "blk.{}.ffn_up.weight"},
           {"encoder.layer.{}.intermediate.dense.bias", "blk.{}.ffn_up.bias"},
           {"encoder.layer.{}.output.dense.weight", "blk.{}.ffn_down.weight"},
           {"encoder.layer.{}.output.dense.bias", "blk.{}.ffn_down.bias"},
           {"encoder.layer.{}.output.LayerNorm.weight", "blk.{}.layer_output_norm.weight"},
           {"encoder.layer.{}.output.LayerNorm.bias", "blk.{}.layer_output_norm.bias"}},
          roberta ? TokenizerKind::bpe : TokenizerKind::wordpiece,  // bpe: tokenizer.json's BPE or Unigram
          bert_extra};
}

// The keys every Llama-style decoder shares.
std::vector<ConfigKey> decoder_keys() {
  return {{"max_position_embeddings", "context_length", Kind::u32, false},
          {"hidden_size", "embedding_length"},
          {"num_hidden_layers", "block_count"},
          {"intermediate_size", "feed_forward_length"},
          {"num_attention_heads", "attention.head_count"},
          {"num_key_value_heads", "attention.head_count_kv", Kind::u32, false},
          {"head_dim", "attention.key_length", Kind::u32, false},
          {"head_dim", "attention.value_length", Kind::u32, false},
          {"rms_norm_eps", "attention.layer_norm_rms_epsilon", Kind::f32},
          {"rope_theta", "rope.freq_base", Kind::f32, false},
          {"vocab_size", "vocab_size"}};
}

struct DecoderShape {
  bool rope_pairs = false;  // llama.cpp's "llama" rope: q and k rows interleaved (see TensorName::Rows)
  bool qkv_bias = false;    // qwen2: biases required
  bool qk_norm = false;     // qwen3: per-head RMS norms of q and k (olmo2: over all heads at once)
  bool post_norms = false;  // olmo2: norms after attention and after the FFN instead of before
  bool experts = false;     // qwen2moe, qwen3moe: a router and stacked experts instead of one FFN
  bool shared_expert = false;  // qwen2moe: plus a sigmoid-gated shared expert
  std::vector<ConfigKey> keys = {};  // beyond decoder_keys()
};

std::vector<TensorName> decoder_tensors(DecoderShape shape) {
  const Rows q_rows = shape.rope_pairs ? Rows::rope_pairs_q : Rows::as_stored;
  const Rows k_rows = shape.rope_pairs ? Rows::rope_pairs_k : Rows::as_stored;
  std::vector<TensorName> t = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight", false},  // absent when tie_word_embeddings
      {"model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight", true, q_rows},
      {"model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight", true, k_rows},
      {"model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
      {"model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
      // Llama's attention_bias fine-tunes carry these too; qwen2 always does.
      {"model.layers.{}.self_attn.q_proj.bias", "blk.{}.attn_q.bias", shape.qkv_bias, q_rows},
      {"model.layers.{}.self_attn.k_proj.bias", "blk.{}.attn_k.bias", shape.qkv_bias, k_rows},
      {"model.layers.{}.self_attn.v_proj.bias", "blk.{}.attn_v.bias", shape.qkv_bias},
      {"model.layers.{}.self_attn.o_proj.bias", "blk.{}.attn_output.bias", false},
  };
  if (shape.experts) {
    t.push_back({"model.layers.{}.mlp.gate.weight", "blk.{}.ffn_gate_inp.weight"});
    t.push_back({"model.layers.{}.mlp.experts.{e}.gate_proj.weight", "blk.{}.ffn_gate_exps.weight"});
    t.push_back({"model.layers.{}.mlp.experts.{e}.up_proj.weight", "blk.{}.ffn_up_exps.weight"});
    t.push_back({"model.layers.{}.mlp.experts.{e}.down_proj.weight", "blk.{}.ffn_down_exps.weight"});
  } else {
    t.push_back({"model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"});
    t.push_back({"model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"});
    t.push_back({"model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"});
  }
  if (shape.shared_expert) {
    t.push_back({"model.layers.{}.mlp.shared_expert_gate.weight", "blk.{}.ffn_gate_inp_shexp.weight"});
    t.push_back({"model.layers.{}.mlp.shared_expert.gate_proj.weight", "blk.{}.ffn_gate_shexp.weight"});
    t.push_back({"model.layers.{}.mlp.shared_expert.up_proj.weight", "blk.{}.ffn_up_shexp.weight"});
    t.push_back({"model.layers.{}.mlp.shared_expert.down_proj.weight", "blk.{}.ffn_down_shexp.weight"});
  }
  if (shape.post_norms) {
    t.push_back({"model.layers.{}.post_attention_layernorm.weight", "blk.{}.post_attention_norm.weight"});
    t.push_back({"model.layers.{}.post_feedforward_layernorm.weight", "blk.{}.post_ffw_norm.weight"});
  } else {
    t.push_back({"model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"});
    t.push_back({"model.layers.{}.post_attention_layernorm.weight", "blk.{}.ffn_norm.weight"});
  }
  if (shape.qk_norm) {
    t.push_back({"model.layers.{}.self_attn.q_norm.weight", "blk.{}.attn_q_norm.weight"});
    t.push_back({"model.layers.{}.self_attn.k_norm.weight", "blk.{}.attn_k_norm.weight"});
  }
  return t;
}

// Gemma 2 and 3 text decoders: what Loom's gemma2/gemma3 fix (as llama.cpp's do) must be what the
// config says.
void gemma_extra(const std::filesystem::path& dir, const json& config, const std::string& arch, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  const std::string act = config.value("hidden_activation", config.value("hidden_act", std::string("gelu_pytorch_tanh")));
  if (act != "gelu_pytorch_tanh") throw Error(config_path + ": hidden_activation '" + act + "' (Gemma runs with gelu_pytorch_tanh)");
  add_rope_scaling(config, config_path, arch, writer);
  const bool gemma3 = arch == "gemma3";
  const int64_t n_layers = config.value("num_hidden_layers", int64_t(0));
  const int64_t pattern = gemma3 ? 6 : 2;  // every pattern-th layer global; Gemma 2 alternates
  if (config.contains("layer_types") && config["layer_types"].is_array()) {
    const json& types = config["layer_types"];
    for (size_t il = 0; il < types.size(); il++) {
      const bool local = types[il] == "sliding_attention";
      if (local != (gemma3 ? (int64_t(il) + 1) % pattern != 0 : int64_t(il) % pattern < pattern - 1))
        throw Error(config_path + ": layer_types differs from " + (gemma3 ? "five sliding layers to one global" : "alternating sliding and global layers") +
                    " (the only layout Loom runs for " + arch + ")");
    }
  }
  if (gemma3 && config.value("rope_local_base_freq", 10000.0) != 10000.0)
    throw Error(config_path + ": rope_local_base_freq is not 10000 (Loom's gemma3 fixes it, as llama.cpp's)");
  const double head_dim = config.value("head_dim", 256.0);
  const double dim_per_head = config.value("hidden_size", 0.0) / std::max(1.0, config.value("num_attention_heads", 1.0));
  const double want = n_layers == (gemma3 ? 62 : 46) ? dim_per_head : head_dim;
  if (config.value("query_pre_attn_scalar", want) != want)
    throw Error(config_path + ": query_pre_attn_scalar is not " + std::to_string(int64_t(want)) + " (Loom's " + arch + " derives it, as llama.cpp's)");
  if (gemma3 && (!config.value("final_logit_softcapping", json()).is_null() || !config.value("attn_logit_softcapping", json()).is_null()))
    throw Error(config_path + ": logit soft-capping is set, which Gemma 3 does not use");
}

// Gemma's rows: norms before and after attention and the FFN, each stored as w where the model
// scales by 1 + w (TensorName::Rows::plus_one); embeddings tied.
std::vector<TensorName> gemma_tensors(bool qk_norm) {
  std::vector<TensorName> t = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight", true, Rows::plus_one},
      {"model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight", true, Rows::plus_one},
      {"model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
      {"model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight"},
      {"model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
      {"model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
      {"model.layers.{}.post_attention_layernorm.weight", "blk.{}.post_attention_norm.weight", true, Rows::plus_one},
      {"model.layers.{}.pre_feedforward_layernorm.weight", "blk.{}.ffn_norm.weight", true, Rows::plus_one},
      {"model.layers.{}.post_feedforward_layernorm.weight", "blk.{}.post_ffw_norm.weight", true, Rows::plus_one},
      {"model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"},
      {"model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"},
      {"model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"}};
  if (qk_norm) {
    t.push_back({"model.layers.{}.self_attn.q_norm.weight", "blk.{}.attn_q_norm.weight", true, Rows::plus_one});
    t.push_back({"model.layers.{}.self_attn.k_norm.weight", "blk.{}.attn_k_norm.weight", true, Rows::plus_one});
  }
  return t;
}

Family gemma(const char* model_type, const char* arch) {
  const bool gemma3 = std::string_view(arch) == "gemma3";
  std::vector<ConfigKey> keys = {{"max_position_embeddings", "context_length", Kind::u32, false},
                                 {"hidden_size", "embedding_length"},
                                 {"num_hidden_layers", "block_count"},
                                 {"intermediate_size", "feed_forward_length"},
                                 {"num_attention_heads", "attention.head_count"},
                                 {"num_key_value_heads", "attention.head_count_kv", Kind::u32, false},
                                 {"head_dim", "attention.key_length"},
                                 {"head_dim", "attention.value_length"},
                                 {"rms_norm_eps", "attention.layer_norm_rms_epsilon", Kind::f32},
                                 {"rope_theta", "rope.freq_base", Kind::f32, false},
                                 {"sliding_window", "attention.sliding_window", Kind::u32, false}};
  if (!gemma3) {
    keys.push_back({"attn_logit_softcapping", "attn_logit_softcapping", Kind::f32, false});
    keys.push_back({"final_logit_softcapping", "final_logit_softcapping", Kind::f32, false});
  }
  return {model_type, arch, "num_hidden_layers", nullptr, nullptr, keys, gemma_tensors(gemma3), TokenizerKind::bpe, gemma_extra};
}

// Phi-3 and Phi-4: fused q/k/v and gate/up rows (kept fused, as llama.cpp's phi3 reads them), partial
// rotary dims, and LongRoPE's factors and attention factor (Phi3MiniModel in the converter).
double phi3_original_context(const json& config) {
  const json rope = rope_parameters(config);
  if (rope.is_object() && rope.contains("original_max_position_embeddings")) return rope["original_max_position_embeddings"].get<double>();
  return config.value("original_max_position_embeddings", config.value("max_position_embeddings", 4096.0));
}

void phi3_extra(const std::filesystem::path& dir, const json& config, const std::string& arch, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  const std::string act = config.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error(config_path + ": hidden_act '" + act + "' (Phi-3 runs with silu)");
  const int64_t dim = config.value("hidden_size", int64_t(0)), heads = std::max<int64_t>(1, config.value("num_attention_heads", int64_t(1)));
  const json rope = rope_parameters(config);
  const double rotary = config.value("partial_rotary_factor", rope.is_object() ? rope.value("partial_rotary_factor", 1.0) : 1.0);
  writer.set_uint32(arch + ".rope.dimension_count", uint32_t(int64_t(rotary * double(dim)) / heads));
  writer.set_uint32(arch + ".rope.scaling.original_context_length", uint32_t(phi3_original_context(config)));
  writer.set_uint32(arch + ".attention.sliding_window", config.value("sliding_window", json()).is_number() ? config["sliding_window"].get<uint32_t>() : 0);
  if (!rope.is_object() || !rope.contains("long_factor")) return add_rope_scaling(config, config_path, arch, writer);
  const std::string type = rope_type(rope, "");
  const double scale = config.value("max_position_embeddings", 0.0) / phi3_original_context(config);
  double attn_factor = 1.0;
  if (type == "su" || type == "longrope") attn_factor = scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(phi3_original_context(config))) : 1.0;
  else if (type == "yarn") attn_factor = scale > 1.0 ? 0.1 * std::log(scale) + 1.0 : 1.0;
  else throw Error(config_path + ": rope scaling '" + type + "' with long_factor (Loom reads longrope, su and yarn)");
  writer.set_float32(arch + ".rope.scaling.attn_factor", float(attn_factor));
}

std::vector<GeneratedTensor> phi3_rope_factors(const json& config) {
  const json rope = rope_parameters(config);
  if (!rope.is_object() || !rope.contains("long_factor")) return {};
  GeneratedTensor long_factors{"rope_factors_long.weight", {}}, short_factors{"rope_factors_short.weight", {}};
  for (const json& v : rope.value("long_factor", json::array())) long_factors.values.push_back(v.get<float>());
  for (const json& v : rope.value("short_factor", json::array())) short_factors.values.push_back(v.get<float>());
  if (long_factors.values.size() != short_factors.values.size() || long_factors.values.empty())
    throw Error("config.json: rope_scaling's long_factor and short_factor differ in length or are empty");
  return {long_factors, short_factors};
}

const std::vector<TensorName> kPhi3Tensors = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight", false},
    {"model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
    {"model.layers.{}.self_attn.qkv_proj.weight", "blk.{}.attn_qkv.weight"},
    {"model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
    {"model.layers.{}.post_attention_layernorm.weight", "blk.{}.ffn_norm.weight"},
    {"model.layers.{}.mlp.gate_up_proj.weight", "blk.{}.ffn_up.weight"},
    {"model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"}};

Family decoder(const char* model_type, const char* arch, DecoderShape shape) {
  std::vector<ConfigKey> keys = decoder_keys();
  if (shape.experts) {
    keys.push_back({"num_experts", "expert_count"});
    keys.push_back({"num_experts_per_tok", "expert_used_count"});
    keys.push_back({"moe_intermediate_size", "expert_feed_forward_length"});
  }
  if (shape.shared_expert) keys.push_back({"shared_expert_intermediate_size", "expert_shared_feed_forward_length"});
  keys.insert(keys.end(), shape.keys.begin(), shape.keys.end());
  return {model_type,
          arch,
          "num_hidden_layers",
          shape.experts ? "num_experts" : nullptr,
          nullptr,
          keys,
          decoder_tensors(shape),
          TokenizerKind::bpe,
          decoder_extra,
          shape.rope_pairs ? llama3_rope_freqs : nullptr};
}

// gpt-oss (GptOssModel in the converter): what Loom's gpt-oss fixes, as llama.cpp's does, must be what
// the config says; yarn rope as published.
void gpt_oss_extra(const std::filesystem::path& dir, const json& config, const std::string& arch, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  const std::string act = config.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error(config_path + ": hidden_act '" + act + "' (gpt-oss runs with its clamped silu)");
  if (config.value("swiglu_limit", 7.0) != 7.0) throw Error(config_path + ": swiglu_limit is not 7 (Loom's gpt-oss fixes it, as llama.cpp's)");
  if (config.contains("layer_types") && config["layer_types"].is_array()) {
    const json& types = config["layer_types"];
    for (size_t il = 0; il < types.size(); il++)
      if ((types[il] == "sliding_attention") != (il % 2 == 0))
        throw Error(config_path + ": layer_types differs from alternating sliding and full layers, sliding first (the only layout Loom runs for gpt-oss)");
  }
  add_rope_scaling(config, config_path, arch, writer);
}

// gpt-oss's rows: biased attention with a sink per head, a biased router, and the experts stacked,
// gate and up interleaved in one MXFP4 gate_up_proj (TensorName::Rows' mxfp4 and column splits).
const std::vector<TensorName> kGptOssTensors = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight", false},
    {"model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight"},
    {"model.layers.{}.post_attention_layernorm.weight", "blk.{}.post_attention_norm.weight"},
    {"model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight"},
    {"model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight"},
    {"model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight"},
    {"model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight"},
    {"model.layers.{}.self_attn.q_proj.bias", "blk.{}.attn_q.bias"},
    {"model.layers.{}.self_attn.k_proj.bias", "blk.{}.attn_k.bias"},
    {"model.layers.{}.self_attn.v_proj.bias", "blk.{}.attn_v.bias"},
    {"model.layers.{}.self_attn.o_proj.bias", "blk.{}.attn_output.bias"},
    {"model.layers.{}.self_attn.sinks", "blk.{}.attn_sinks.weight"},
    {"model.layers.{}.mlp.router.weight", "blk.{}.ffn_gate_inp.weight"},
    {"model.layers.{}.mlp.router.bias", "blk.{}.ffn_gate_inp.bias"},
    {"model.layers.{}.mlp.experts.gate_up_proj", "blk.{}.ffn_gate_exps.weight", true, Rows::mxfp4_even_rows},
    {"model.layers.{}.mlp.experts.gate_up_proj", "blk.{}.ffn_up_exps.weight", true, Rows::mxfp4_odd_rows},
    {"model.layers.{}.mlp.experts.down_proj", "blk.{}.ffn_down_exps.weight", true, Rows::mxfp4},
    {"model.layers.{}.mlp.experts.gate_up_proj_bias", "blk.{}.ffn_gate_exps.bias", true, Rows::even_columns},
    {"model.layers.{}.mlp.experts.gate_up_proj_bias", "blk.{}.ffn_up_exps.bias", true, Rows::odd_columns},
    {"model.layers.{}.mlp.experts.down_proj_bias", "blk.{}.ffn_down_exps.bias"}};

// Qwen 3.5 (Qwen3_5ForCausalLM; the text model of Qwen3_5ForConditionalGeneration), its MoE variant
// and Qwen3-Next, whose layers it inherits: every
// full_attention_interval-th layer gated attention (q_proj holds each head's q and its output gate;
// q/k norms), the others Gated DeltaNet (linear_attn.*, linear_attention.h); zero-centred norms
// stored as w for a scale of 1 + w, except the DeltaNet's own; partial rope in interleaved M-RoPE
// sections (Qwen3NextModel and Qwen3_5TextModel in the converter).
void qwen35_extra(const std::filesystem::path& dir, const json& config, const std::string& arch, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  const std::string act = config.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error(config_path + ": hidden_act '" + act + "' (Qwen 3.5 runs with silu)");
  if (!config.value("attn_output_gate", true)) throw Error(config_path + ": attn_output_gate is false (Loom's qwen35 gates every attention head)");
  add_rope_scaling(config, config_path, arch, writer);
  const int64_t interval = config.value("full_attention_interval", int64_t(4));
  if (interval <= 0) throw Error(config_path + ": full_attention_interval is not positive");
  writer.set_uint32(arch + ".full_attention_interval", uint32_t(interval));
  if (config.contains("layer_types") && config["layer_types"].is_array()) {
    const json& types = config["layer_types"];
    for (size_t il = 0; il < types.size(); il++)
      if ((types[il] == "full_attention") != ((int64_t(il) + 1) % interval == 0))
        throw Error(config_path + ": layer_types differs from one attention layer every full_attention_interval (" + std::to_string(interval) +
                    ") layers, the only layout Loom runs");
  }
  const ValueHeads v = value_heads_of(config);
  if (v.n_k_heads <= 0 || v.n_v_heads <= 0 || v.n_v_heads % v.n_k_heads != 0 || v.v_head_dim <= 0 || v.k_head_dim <= 0)
    throw Error(config_path + ": linear_num_value_heads must be a positive multiple of linear_num_key_heads, with linear_key_head_dim and "
                "linear_value_head_dim");
  writer.set_uint32(arch + ".ssm.inner_size", uint32_t(v.n_v_heads * v.v_head_dim));
  const json rope = rope_parameters(config);
  const double rotary = rope.is_object() ? rope.value("partial_rotary_factor", config.value("partial_rotary_factor", 0.25))
                                         : config.value("partial_rotary_factor", 0.25);
  const int64_t head_dim = config.value("head_dim", config.value("hidden_size", int64_t(0)) / std::max<int64_t>(1, config.value("num_attention_heads", int64_t(1))));
  writer.set_uint32(arch + ".rope.dimension_count", uint32_t(int64_t(double(head_dim) * rotary)));
  if (config.contains("num_experts")) {  // Loom's qwen35moe and qwen3next normalise the chosen experts' weights
    if (!config.value("norm_topk_prob", true)) throw Error(config_path + ": norm_topk_prob is false, which this family does not run");
    if (config.value("decoder_sparse_step", 1) != 1 || !config.value("mlp_only_layers", json::array()).empty())
      throw Error(config_path + ": decoder_sparse_step or mlp_only_layers makes some layers dense, which Loom does not run");
  }
  if (arch == "qwen3next") return;  // plain NEOX rope over the rotary dims
  // The converter writes Qwen 3.5's default sections when rope_parameters has none.
  std::vector<int32_t> sections = {11, 11, 10, 0};
  if (rope.is_object() && rope.contains("mrope_section") && rope["mrope_section"].is_array()) {
    sections.assign(4, 0);
    const json& given = rope["mrope_section"];
    if (given.size() > 4) throw Error(config_path + ": mrope_section has more than four sections");
    for (size_t i = 0; i < given.size(); i++) sections[i] = given[i].get<int32_t>();
  }
  writer.set_int32_array(arch + ".rope.dimension_sections", sections);
}

enum class Qwen35Kind { dense, moe, next };

// Qwen 3.5's tensors, the MoE variant's router, experts and shared expert, and Qwen3-Next's fused
// in_proj_qkvz and in_proj_ba (its value heads stay grouped: Family::tiles_value_heads).
std::vector<TensorName> qwen35_tensors(Qwen35Kind kind) {
  std::vector<TensorName> t = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight", true, Rows::plus_one},
      {"lm_head.weight", "output.weight", false},
      {"model.layers.{}.input_layernorm.weight", "blk.{}.attn_norm.weight", true, Rows::plus_one},
      {"model.layers.{}.post_attention_layernorm.weight", "blk.{}.post_attention_norm.weight", true, Rows::plus_one},
      // Attention layers only.
      {"model.layers.{}.self_attn.q_proj.weight", "blk.{}.attn_q.weight", false},
      {"model.layers.{}.self_attn.k_proj.weight", "blk.{}.attn_k.weight", false},
      {"model.layers.{}.self_attn.v_proj.weight", "blk.{}.attn_v.weight", false},
      {"model.layers.{}.self_attn.o_proj.weight", "blk.{}.attn_output.weight", false},
      {"model.layers.{}.self_attn.q_norm.weight", "blk.{}.attn_q_norm.weight", false, Rows::plus_one},
      {"model.layers.{}.self_attn.k_norm.weight", "blk.{}.attn_k_norm.weight", false, Rows::plus_one},
      // Gated DeltaNet layers only.
      {"model.layers.{}.linear_attn.conv1d.weight", "blk.{}.ssm_conv1d.weight", false, Rows::value_head_conv},
      {"model.layers.{}.linear_attn.dt_bias", "blk.{}.ssm_dt.bias", false, Rows::value_head_scalars},
      {"model.layers.{}.linear_attn.A_log", "blk.{}.ssm_a", false, Rows::value_head_a_log},
      {"model.layers.{}.linear_attn.norm.weight", "blk.{}.ssm_norm.weight", false},
      {"model.layers.{}.linear_attn.out_proj.weight", "blk.{}.ssm_out.weight", false, Rows::value_head_columns}};
  if (kind == Qwen35Kind::next) {
    t.push_back({"model.layers.{}.linear_attn.in_proj_qkvz.weight", "blk.{}.attn_qkv.weight", false, Rows::qkvz_qkv});
    t.push_back({"model.layers.{}.linear_attn.in_proj_qkvz.weight", "blk.{}.attn_gate.weight", false, Rows::qkvz_z});
    t.push_back({"model.layers.{}.linear_attn.in_proj_ba.weight", "blk.{}.ssm_ba.weight", false});
  } else {
    t.push_back({"model.layers.{}.linear_attn.in_proj_qkv.weight", "blk.{}.attn_qkv.weight", false, Rows::value_head_qkv_rows});
    t.push_back({"model.layers.{}.linear_attn.in_proj_z.weight", "blk.{}.attn_gate.weight", false, Rows::value_head_rows});
    t.push_back({"model.layers.{}.linear_attn.in_proj_b.weight", "blk.{}.ssm_beta.weight", false, Rows::value_head_scalars});
    t.push_back({"model.layers.{}.linear_attn.in_proj_a.weight", "blk.{}.ssm_alpha.weight", false, Rows::value_head_scalars});
  }
  if (kind == Qwen35Kind::dense) {
    t.push_back({"model.layers.{}.mlp.gate_proj.weight", "blk.{}.ffn_gate.weight"});
    t.push_back({"model.layers.{}.mlp.up_proj.weight", "blk.{}.ffn_up.weight"});
    t.push_back({"model.layers.{}.mlp.down_proj.weight", "blk.{}.ffn_down.weight"});
    return t;
  }
  t.push_back({"model.layers.{}.mlp.gate.weight", "blk.{}.ffn_gate_inp.weight"});
  t.push_back({"model.layers.{}.mlp.experts.{e}.gate_proj.weight", "blk.{}.ffn_gate_exps.weight"});
  t.push_back({"model.layers.{}.mlp.experts.{e}.up_proj.weight", "blk.{}.ffn_up_exps.weight"});
  t.push_back({"model.layers.{}.mlp.experts.{e}.down_proj.weight", "blk.{}.ffn_down_exps.weight"});
  t.push_back({"model.layers.{}.mlp.shared_expert_gate.weight", "blk.{}.ffn_gate_inp_shexp.weight"});
  t.push_back({"model.layers.{}.mlp.shared_expert.gate_proj.weight", "blk.{}.ffn_gate_shexp.weight"});
  t.push_back({"model.layers.{}.mlp.shared_expert.up_proj.weight", "blk.{}.ffn_up_shexp.weight"});
  t.push_back({"model.layers.{}.mlp.shared_expert.down_proj.weight", "blk.{}.ffn_down_shexp.weight"});
  return t;
}

Family qwen35(const char* model_type, const char* arch, Qwen35Kind kind) {
  std::vector<ConfigKey> keys = decoder_keys();
  keys.push_back({"linear_conv_kernel_dim", "ssm.conv_kernel"});
  keys.push_back({"linear_key_head_dim", "ssm.state_size"});
  keys.push_back({"linear_num_key_heads", "ssm.group_count"});
  keys.push_back({"linear_num_value_heads", "ssm.time_step_rank"});
  if (kind != Qwen35Kind::dense) {
    keys.push_back({"num_experts", "expert_count"});
    keys.push_back({"num_experts_per_tok", "expert_used_count"});
    keys.push_back({"moe_intermediate_size", "expert_feed_forward_length"});
    keys.push_back({"shared_expert_intermediate_size", "expert_shared_feed_forward_length"});
  }
  Family f{model_type, arch, "num_hidden_layers", kind == Qwen35Kind::dense ? nullptr : "num_experts", nullptr, keys, qwen35_tensors(kind),
           TokenizerKind::bpe, qwen35_extra};
  f.tiles_value_heads = kind != Qwen35Kind::next;
  return f;
}

const std::vector<Family> kFamilies = {
    bert("bert", "bert."),
    bert("xlm-roberta", "roberta."),
    // llama.cpp converts MistralForCausalLM to its "llama" architecture.
    decoder("llama", "llama", {.rope_pairs = true}),
    decoder("mistral", "llama", {.rope_pairs = true}),
    decoder("qwen2", "qwen2", {.qkv_bias = true}),
    decoder("qwen3", "qwen3", {.qk_norm = true}),
    decoder("qwen2_moe", "qwen2moe", {.qkv_bias = true, .experts = true, .shared_expert = true}),
    decoder("qwen3_moe", "qwen3moe", {.qk_norm = true, .experts = true}),
    gemma("gemma2", "gemma2"),
    gemma("gemma3_text", "gemma3"),
    gemma4_family(),
    {"phi3", "phi3", "num_hidden_layers", nullptr, nullptr,
     {{"max_position_embeddings", "context_length"},
      {"hidden_size", "embedding_length"},
      {"num_hidden_layers", "block_count"},
      {"intermediate_size", "feed_forward_length"},
      {"num_attention_heads", "attention.head_count"},
      {"num_key_value_heads", "attention.head_count_kv", Kind::u32, false},
      {"rms_norm_eps", "attention.layer_norm_rms_epsilon", Kind::f32},
      {"rope_theta", "rope.freq_base", Kind::f32, false, 10000.0},
      {"vocab_size", "vocab_size"}},
     kPhi3Tensors, TokenizerKind::bpe, phi3_extra, phi3_rope_factors},
    decoder("olmo2", "olmo2", {.qk_norm = true, .post_norms = true}),
    {"gpt_oss", "gpt-oss", "num_hidden_layers", nullptr, nullptr,
     {{"max_position_embeddings", "context_length", Kind::u32, false},
      {"hidden_size", "embedding_length"},
      {"num_hidden_layers", "block_count"},
      {"intermediate_size", "feed_forward_length"},
      {"num_attention_heads", "attention.head_count"},
      {"num_key_value_heads", "attention.head_count_kv"},
      {"head_dim", "attention.key_length"},
      {"head_dim", "attention.value_length"},
      {"rms_norm_eps", "attention.layer_norm_rms_epsilon", Kind::f32},
      {"rope_theta", "rope.freq_base", Kind::f32, false},
      {"num_local_experts", "expert_count"},
      {"num_experts_per_tok", "expert_used_count"},
      {"intermediate_size", "expert_feed_forward_length"},
      {"sliding_window", "attention.sliding_window"},
      {"vocab_size", "vocab_size"}},
     kGptOssTensors, TokenizerKind::bpe, gpt_oss_extra},
    // SmolLM3's no_rope_layers (every fourth layer without rope) is what Loom's smollm3 runs; checked below.
    decoder("smollm3", "smollm3", {.rope_pairs = true}),
    // Granite's four multipliers, under llama.cpp's names for them.
    decoder("granite", "granite", {.rope_pairs = true,
                                   .keys = {{"attention_multiplier", "attention.scale", Kind::f32, false},
                                            {"embedding_multiplier", "embedding_scale", Kind::f32, false},
                                            {"residual_multiplier", "residual_scale", Kind::f32, false},
                                            {"logits_scaling", "logit_scale", Kind::f32, false}}}),
    qwen35("qwen3_5_text", "qwen35", Qwen35Kind::dense),
    qwen35("qwen3_5_moe_text", "qwen35moe", Qwen35Kind::moe),
    qwen35("qwen3_next", "qwen3next", Qwen35Kind::next),
};

// Gemma3TextConfig's defaults (transformers), for the keys a Gemma 3 vision model's text_config omits
// (gemma-3-4b-it's gives five of them).
constexpr const char* kGemma3TextDefaults = R"({
  "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
  "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "query_pre_attn_scalar": 256,
  "sliding_window": 4096, "final_logit_softcapping": null, "attn_logit_softcapping": null,
  "rope_local_base_freq": 10000.0, "rope_scaling": null})";

const std::vector<Wrapper> kWrappers = {
    {"gemma3", "gemma3_text", kGemma3TextDefaults,
     {{"model.", "language_model.model."}, {"model.", "model.language_model."}, {"lm_head.", "language_model.lm_head."}}},
    // Qwen 3.5's releases are multimodal: the text model under model.language_model (its text_config
    // gives every key; the vision tower and the MTP layers stay unread).
    // Gemma 4's releases carry vision and audio towers beside the text model (model.language_model).
    {"gemma4", "gemma4_text", kGemma4TextDefaults, {{"model.", "model.language_model."}}},
    {"qwen3_5", "qwen3_5_text", "{}", {{"model.", "model.language_model."}}},
    {"qwen3_5_moe", "qwen3_5_moe_text", "{}", {{"model.", "model.language_model."}}},
};

}  // namespace

const Wrapper* find_wrapper(const std::string& model_type) {
  for (const Wrapper& w : kWrappers)
    if (model_type == w.model_type) return &w;
  return nullptr;
}

const Family* find_family(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string family_names() {
  std::string names;
  for (const Family& f : kFamilies) names += (names.empty() ? "" : ", ") + std::string(f.model_type);
  for (const Wrapper& w : kWrappers) names += ", " + std::string(w.model_type) + " (its text model)";
  return names;
}

}  // namespace loom::hf
