// A model family as Loom reads it from a Hugging Face folder: one table of config.json keys and
// tensor names (llama.cpp's converter's GGUF names on the right), a tokenizer kind, and a hook for what
// a table cannot say (sentence-transformers pooling, checks of unsupported variants). hf_checkpoint.cpp
// does the reading for every family; hf_families.cpp holds the tables.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_writer.h"

namespace loom::hf {

struct ConfigKey {
  enum class Kind { u32, f32 };
  const char* hf;    // config.json's key
  const char* gguf;  // the GGUF key after "<arch>."
  Kind kind = Kind::u32;
  bool required = true;
  // When not required and absent: this value, or no GGUF key at all (llama.cpp's own default applies).
  std::optional<double> fallback = std::nullopt;
};

struct TensorName {
  // How the stored values become llama.cpp's. Llama-style checkpoints rotate each head's two halves
  // (rotate_half); llama.cpp's "llama" rope rotates neighbouring pairs, so its converter interleaves
  // the halves of every q and k head (LlamaModel.permute), q by attention heads, k by KV heads.
  // Gemma's and Qwen 3.5's RMS norms scale by 1 + w; the converter stores 1 + w (as F32).
  // gpt-oss publishes its experts stacked, gate and up rows interleaved in one gate_up_proj (even rows
  // gate, odd rows up; its bias likewise), and in MXFP4 as `_blocks` and `_scales` beside the name: the
  // converter splits the rows and repacks the blocks into ggml's MXFP4 (gpt_oss_experts.h).
  // Qwen 3.5's linear attention reorders its value heads (linear_attention.h): in_proj_qkv's value rows
  // (value_head_qkv_rows), rows of value_head_dim (value_head_rows) or of one (value_head_scalars),
  // A_log as -exp (value_head_a_log), conv1d's value channels (value_head_conv), out_proj's columns
  // (value_head_columns). Qwen3-Next's fused in_proj_qkvz splits into attn_qkv (qkvz_qkv) and
  // attn_gate (qkvz_z) without reordering its value heads. RoBERTa's position embeddings start after
  // the padding id (pad_token_id + 1 rows unused): the converter drops them (after_padding_positions).
  enum class Rows {
    as_stored, rope_pairs_q, rope_pairs_k, plus_one,
    value_head_qkv_rows, value_head_rows, value_head_scalars, value_head_a_log, value_head_conv, value_head_columns, qkvz_qkv, qkvz_z,
    after_padding_positions,
    mxfp4_even_rows, mxfp4_odd_rows, mxfp4, even_columns, odd_columns  // last: add_split_experts takes these
  };
  // The checkpoint's name; "{}" stands for the layer index, and "{e}" for an expert's: the experts'
  // matrices are stacked into one GGUF tensor, expert 0 first, as llama.cpp's converter stacks them
  // (a copy: a GGUF tensor is one range of bytes).
  const char* hf;
  const char* gguf;  // llama.cpp's; "{}" for the layer index
  bool required = true;
  Rows rows = Rows::as_stored;
};

// A tensor the converter computes from config.json rather than reads (Llama 3.1's rope_freqs).
struct GeneratedTensor {
  std::string gguf;
  std::vector<float> values;  // one F32 row
};

// bpe: byte-level or SentencePiece-style, as the file says; gemma4: SentencePiece-style pieces kept with
// their merges (llama.cpp's "gemma4" model).
enum class TokenizerKind { wordpiece, bpe, gemma4 };

struct Family {
  const char* model_type;           // config.json's model_type
  const char* arch;                 // general.architecture
  const char* layer_count;          // config.json's key for the number of layers
  const char* expert_count;         // config.json's key for the number of experts, or nullptr
  const char* prefix;               // an optional prefix of every tensor name ("bert." in task heads)
  std::vector<ConfigKey> keys;
  std::vector<TensorName> tensors;
  TokenizerKind tokenizer;
  // Metadata the table cannot give (keys under `arch`), and loom::Error for a variant Loom does not run.
  void (*extra)(const std::filesystem::path& dir, const nlohmann::json& config, const std::string& arch, gguf::GgufWriter& writer) = nullptr;
  std::vector<GeneratedTensor> (*generated)(const nlohmann::json& config) = nullptr;
  // Qwen 3.5: value heads go from the checkpoint's grouped order to llama.cpp's tiled one (the
  // TensorName::Rows value_head_* kinds; without it they only squeeze and exponentiate).
  bool tiles_value_heads = false;
};

// A multimodal checkpoint whose text model is a family Loom reads (Gemma3ForConditionalGeneration):
// the text model's config is its `text_config` over the text config class's defaults (transformers
// leaves out what equals them), and its tensors lie under another name. The other towers (vision,
// projector) stay unread in the file.
struct Wrapper {
  const char* model_type;       // config.json's, e.g. "gemma3"
  const char* text_model_type;  // the family the text model is, e.g. "gemma3_text"
  const char* text_defaults;    // JSON object: the defaults of the text config class
  // Where the text model's tensors lie: a name starting with the first string is also looked up with
  // it replaced by the second (transformers' layouts before and after 4.52).
  std::vector<std::pair<std::string, std::string>> renames;
};

// The family of a config.json model_type, or nullptr.
const Family* find_family(const std::string& model_type);
// The wrapper of a config.json model_type, or nullptr.
const Wrapper* find_wrapper(const std::string& model_type);
// "bert, ...": the model_types Loom reads, for errors.
std::string family_names();

}  // namespace loom::hf
