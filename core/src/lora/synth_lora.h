// A synthetic LoRA adapter for a base model, in llama.cpp's GGUF adapter layout (convert_lora_to_gguf.py's
// names and keys), with seeded random A and B for every attention and FFN projection the base model
// has unfused: what the adapter tests and `loom bench --lora` run, and what llama.cpp loads as an
// adapter of the same base.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "loom/dtype.h"

namespace loom {

struct SynthLoraSpec {
  int64_t rank = 8;
  float alpha = 0.0f;  // 0: the rank (a scale of 1 per matrix)
  loom_dtype type = LOOM_DTYPE_F32;  // of A and B: F32 or F16
  uint64_t seed = 1;
  std::string targets = "q,k,v,o,gate,up,down";  // of attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down
};

// Writes the adapter of `base` (a GGUF model file) to `out`; returns the number of matrices adapted.
// loom::Error naming the base file when it has none of the targets.
int write_synthetic_lora(const std::filesystem::path& base, const SynthLoraSpec& spec, const std::filesystem::path& out);

}  // namespace loom
