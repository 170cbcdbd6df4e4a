// The families Loom reads from Hugging Face folders, as llama.cpp's converter (conversion/*.py) maps them.

#include "common/error.h"
#include "hf/json_file.h"
#include "hf/hf_family.h"

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

void bert_extra(const std::filesystem::path& dir, const json& config, gguf::GgufWriter& writer) {
  const std::string config_path = (dir / "config.json").string();
  if (config.value("hidden_act", std::string("gelu")) != "gelu")
    throw Error(config_path + ": hidden_act '" + config.value("hidden_act", std::string()) + "' (Loom runs bert with gelu)");
  if (config.value("position_embedding_type", std::string("absolute")) != "absolute")
    throw Error(config_path + ": position_embedding_type '" + config.value("position_embedding_type", std::string()) + "' (Loom runs bert with absolute positions)");
  writer.set_bool("bert.attention.causal", false);
  writer.set_uint32("bert.pooling_type", sentence_transformers_pooling(dir));
}

using Kind = ConfigKey::Kind;

const std::vector<Family> kFamilies = {
    {"bert", "bert", "num_hidden_layers", "bert.",
     {{"max_position_embeddings", "context_length"},
      {"hidden_size", "embedding_length"},
      {"num_hidden_layers", "block_count"},
      {"intermediate_size", "feed_forward_length"},
      {"num_attention_heads", "attention.head_count"},
      {"layer_norm_eps", "attention.layer_norm_epsilon", Kind::f32, false, 1e-12}},
     {{"embeddings.word_embeddings.weight", "token_embd.weight"},
      {"embeddings.position_embeddings.weight", "position_embd.weight"},
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
     TokenizerKind::wordpiece, bert_extra},
};

}  // namespace

const Family* find_family(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string family_names() {
  std::string names;
  for (const Family& f : kFamilies) names += (names.empty() ? "" : ", ") + std::string(f.model_type);
  return names;
}

}  // namespace loom::hf
