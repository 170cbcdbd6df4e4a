// llama.cpp's named K-quant mixes (`llama-quantize ... Q4_K_M`): a base type for the matrices and
// rules that give some tensors more bits (attn_v and ffn_down in chosen layers, the output matrix),
// reproduced from its llama_tensor_get_type for dense models quantized without an importance matrix,
// so `loom quantize --type Q4_K_M` writes the tensor types llama-quantize writes (quantize.llama_mix
// compares them tensor by tensor, and the bytes, against llama.cpp on the same input).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/dtype.h"
#include "quantize/quant_plan.h"

namespace loom {

// Q2_K_S and the IQ mixes are absent: llama.cpp refuses them without an importance matrix.
enum class MixKind { q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m };

struct QuantMix {
  MixKind kind;
  std::string name;    // "Q4_K_M"
  loom_dtype base;     // the type of every matrix no rule names
  uint32_t file_type;  // general.file_type: llama.cpp's LLAMA_FTYPE_MOSTLY_*
};

// The mix named `text` (case-insensitive), or nullopt.
std::optional<QuantMix> find_quant_mix(std::string_view text);
const std::vector<QuantMix>& quant_mixes();

// What the rules read from the model: its layer count and query heads per KV head.
struct MixModel {
  int n_layers = 0;
  int n_gqa = 1;
};

// The type each tensor gets under `mix`, in input order: the rule's type for matrices, nullopt for
// what the plan keeps as it is (1-D tensors, non-float data). A row length the type's block does not
// divide falls back as llama.cpp's tensor_type_fallback does (plan_tensors applies it).
std::vector<std::optional<loom_dtype>> mix_tensor_types(const QuantMix& mix, const MixModel& model,
                                                        const std::vector<TensorShape>& tensors);

}  // namespace loom
