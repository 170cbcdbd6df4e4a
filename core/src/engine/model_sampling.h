// A model's recommended sampling: general.sampling.* in a GGUF (llama.cpp's converter writes them from
// the checkpoint's generation_config.json, and Loom's reader of Hugging Face folders does the same).
// llama.cpp uses them unless the command line sets a sampler option; Loom uses them unless loom.toml
// sets the key. A request's own parameters override both.
#pragma once

#include <set>
#include <string>

#include "config/config.h"
#include "gguf/gguf_file.h"

namespace loom {

// `settings` with each key the file recommends and loom.toml does not set (`given`: "sampler.KEY").
// Values outside loom.toml's allowed ranges are ignored.
SamplerSettings with_model_sampling(const SamplerSettings& settings, const std::set<std::string>& given, const gguf::GgufFile& file);

}  // namespace loom
