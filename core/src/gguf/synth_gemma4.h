// The Gemma 4 part of the synthetic-model writer: its hyper-parameters (per-layer head sizes, KV
// heads and FFN widths, shared KV layers, per-layer embeddings) and its tensors.
#pragma once

#include "gguf/synth_model.h"

namespace loom::gguf {

class GgufWriter;

void build_gemma4_model(const SynthSpec& spec, GgufWriter& writer);  // metadata
void add_gemma4_tensors(const SynthSpec& spec, GgufWriter& writer);

}  // namespace loom::gguf
