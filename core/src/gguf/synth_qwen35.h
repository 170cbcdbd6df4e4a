// The Qwen 3.5 part of the synthetic-model writer: a hybrid of Gated DeltaNet layers and gated
// full-attention layers (every full_attention_interval-th), with llama.cpp's keys and tensor names.
// The linear-attention geometry follows the attention one: n_kv_heads key heads and n_heads value
// heads of head_dim each, a short convolution of 4 taps. qwen35moe replaces the FFN with experts
// and a gated shared expert; qwen3next is qwen35moe with plain rope, value heads grouped by key
// head, and beta/alpha fused into ssm_ba.
#pragma once

#include "gguf/synth_model.h"

namespace loom::gguf {

class GgufWriter;

void build_qwen35_model(const SynthSpec& spec, GgufWriter& writer);  // metadata
void add_qwen35_tensors(const SynthSpec& spec, GgufWriter& writer);

}  // namespace loom::gguf
