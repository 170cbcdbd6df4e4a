// A model family as Loom reads it from a Hugging Face folder: one table of config.json keys and
// tensor names (llama.cpp's converter's GGUF names on the right), a tokenizer kind, and a hook for what
// a table cannot say (sentence-transformers pooling, checks of unsupported variants). hf_checkpoint.cpp
// does the reading for every family; hf_families.cpp holds the tables.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"

namespace loom::hf {

struct ConfigKey {
  enum class Kind { u32, f32 };
  const char* hf;    // config.json's key
  const char* gguf;  // the GGUF key after "<arch>."
  Kind kind = Kind::u32;
  bool required = true;
  double fallback = 0.0;  // when not required and absent
};

struct TensorName {
  const char* hf;    // the checkpoint's name; "{}" stands for the layer index
  const char* gguf;  // llama.cpp's; "{}" likewise
};

enum class TokenizerKind { wordpiece };

struct Family {
  const char* model_type;           // config.json's model_type
  const char* arch;                 // general.architecture
  const char* layer_count;          // config.json's key for the number of layers
  const char* prefix;               // an optional prefix of every tensor name ("bert." in task heads)
  std::vector<ConfigKey> keys;
  std::vector<TensorName> tensors;  // all required
  TokenizerKind tokenizer;
  // Metadata the table cannot give, and loom::Error for a variant Loom does not run.
  void (*extra)(const std::filesystem::path& dir, const nlohmann::json& config, gguf::GgufWriter& writer) = nullptr;
};

// The family of a config.json model_type, or nullptr.
const Family* find_family(const std::string& model_type);
// "bert, ...": the model_types Loom reads, for errors.
std::string family_names();

}  // namespace loom::hf
