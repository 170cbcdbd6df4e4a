// Gemma 4's text decoder (Gemma4TextConfig, model_type gemma4_text; inside Gemma4ForConditionalGeneration
// as gemma4) as llama.cpp's converter maps it (conversion/gemma.py, Gemma4Model): sliding and full
// layers of different head sizes and KV heads, "proportional" rope on full layers (a rope_freqs tensor
// that leaves the unrotated pairs still), the last num_kv_shared_layers reading an earlier layer's KV,
// wider FFNs there (use_double_wide_mlp), per-layer embeddings and a scalar per layer. Its norms scale
// by w, not 1 + w as Gemma 2 and 3's do.
#pragma once

#include "hf/hf_family.h"

namespace loom::hf {

Family gemma4_family();

// Gemma4TextConfig's defaults (transformers), for the keys a Gemma 4 release's text_config omits.
extern const char* const kGemma4TextDefaults;

}  // namespace loom::hf
