// A LoRA adapter as PEFT saves it (a folder of adapter_config.json and adapter_model.safetensors), read
// into the same LoraAdapter llama.cpp's GGUF adapters give (lora_adapter.h), as llama.cpp's
// convert_lora_to_gguf.py would convert it: lora_A [r, n_in] and lora_B [n_out, r] per projection, the
// scale lora_alpha / r (or / sqrt(r) with use_rslora) folded into B, and for the families whose GGUF
// interleaves each q and k head's rope halves (llama, mistral3, granite, smollm3) lora_B's q and k rows
// interleaved the same way, so B (A x) lands where the base weight's rows are.
#pragma once

#include <filesystem>
#include <string>

#include "lora/lora_adapter.h"

namespace loom {

struct ModelInfo;

bool is_peft_adapter_dir(const std::filesystem::path& path);

// loom::Error naming the file and the key or tensor: another peft_type, DoRA, fan_in_fan_out,
// rank_pattern / alpha_pattern, modules_to_save, a pickle-only adapter_model.bin, a module Loom does
// not adapt, a layer past the model's, a missing A or B.
LoraAdapter read_peft_adapter(const std::filesystem::path& dir, std::string name, const ModelInfo& info);

}  // namespace loom
