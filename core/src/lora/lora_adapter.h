// A LoRA adapter in llama.cpp's GGUF adapter format (convert_lora_to_gguf.py): general.type "adapter",
// adapter.type "lora", adapter.lora.alpha, and for each adapted matrix `<base name>.lora_a` [n_in, rank]
// and `<base name>.lora_b` [rank, n_out]. Applied at run time, never merged: y = W x + s · B (A x), with
// s = scale · alpha / rank as llama.cpp computes it (scale alone when alpha is 0), per matrix because a
// rank may differ between matrices. The factor alpha / rank is folded into B here, so a slot's one run-time
// scale is the user's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace loom {

// The projections an adapter may target, as llama.cpp names their weights.
enum class LoraTarget : uint8_t { attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down };
inline constexpr int kLoraTargets = 7;
const char* lora_target_name(LoraTarget target);  // "attn_q", ...

struct LoraMatrix {
  int32_t layer = 0;
  LoraTarget target = LoraTarget::attn_q;
  int64_t n_in = 0, n_out = 0, rank = 0;
  std::vector<float> a;  // [rank][n_in]: row j is the j-th down-projection
  std::vector<float> b;  // [n_out][rank], times alpha / rank
};

struct LoraAdapter {
  std::string name;
  std::filesystem::path path;
  std::string architecture;  // general.architecture: must be the base model's
  float alpha = 0.0f;
  int64_t max_rank = 0;
  std::vector<LoraMatrix> matrices;
};

// Reads and checks the file: an adapter of LoRA type, pairs complete and of matching rank, every
// adapted tensor one of the projections above in a layer below n_layers, F32/F16/BF16/Q8_0 values.
// loom::Error naming the file and the tensor or key otherwise (the base model's shapes are checked
// when the adapter is put in a slot: Model::set_lora).
LoraAdapter read_lora_adapter(const std::filesystem::path& path, std::string name, int32_t n_layers);

}  // namespace loom
