// A Hugging Face model folder as it is published (config.json, model.safetensors or shards with
// model.safetensors.index.json, tokenizer.json) opened as a GgufFile: the metadata and tensor names of
// llama.cpp's converter, the tensors left in the safetensors mappings (nothing copied). Every loader
// that takes a GgufFile takes the folder too.
//
// Families, one table each (hf_families.cpp): bert (BertModel, sentence-transformers embedders such as
// all-MiniLM, with their pooling from 1_Pooling/config.json); the decoders llama, mistral, qwen2,
// qwen3, olmo2, smollm3 and granite with their byte-level BPE tokenizer.json. Issue 38 adds the others.
#pragma once

#include <filesystem>
#include <string>

#include "gguf/gguf_file.h"

namespace loom::hf {

// True for a directory holding config.json.
bool is_checkpoint_dir(const std::filesystem::path& path);

// loom::Error naming the folder and the file, key or tensor when it cannot be read: a missing or
// malformed config.json, a model_type Loom does not map, a missing or misshapen tensor, a tokenizer
// model it does not read.
gguf::GgufFile open_checkpoint(const std::filesystem::path& dir);

// A GGUF file or a checkpoint folder, whichever `path` is.
gguf::GgufFile open_model_file(const std::filesystem::path& path);

// The name a model goes by (the API's "model"): a GGUF file's stem, a folder's whole name (dots kept,
// a trailing separator ignored: ./bge-small-en-v1.5/ is "bge-small-en-v1.5").
std::string model_name_of(const std::filesystem::path& path);

}  // namespace loom::hf
