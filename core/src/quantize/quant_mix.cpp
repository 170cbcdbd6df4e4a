#include "quantize/quant_mix.h"

#include <algorithm>
#include <cctype>

#include "gguf/dtype_traits.h"

namespace loom {

namespace {

enum class Category { output, token_embd, attn_v, attn_k, attn_q, attn_output, ffn_up, ffn_gate, ffn_down, other };

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama.cpp's tensor_get_category, in its order (attn_qkv and attn_kv_b count as attn_v).
Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::token_embd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) return Category::attn_v;
  if (contains(name, "attn_k.weight")) return Category::attn_k;
  if (contains(name, "attn_q.weight")) return Category::attn_q;
  if (contains(name, "attn_output.weight")) return Category::attn_output;
  if (contains(name, "ffn_up")) return Category::ffn_up;
  if (contains(name, "ffn_gate")) return Category::ffn_gate;
  if (contains(name, "ffn_down")) return Category::ffn_down;
  return Category::other;
}

// The layers that get more bits: the first and last eighth, and every third in between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

}  // namespace

const std::vector<QuantMix>& quant_mixes() {
  static const std::vector<QuantMix> mixes = {
      {MixKind::q3_k_s, "Q3_K_S", LOOM_DTYPE_Q3_K, 11},
      {MixKind::q3_k_m, "Q3_K_M", LOOM_DTYPE_Q3_K, 12}, {MixKind::q3_k_l, "Q3_K_L", LOOM_DTYPE_Q3_K, 13},
      {MixKind::q4_k_s, "Q4_K_S", LOOM_DTYPE_Q4_K, 14}, {MixKind::q4_k_m, "Q4_K_M", LOOM_DTYPE_Q4_K, 15},
      {MixKind::q5_k_s, "Q5_K_S", LOOM_DTYPE_Q5_K, 16}, {MixKind::q5_k_m, "Q5_K_M", LOOM_DTYPE_Q5_K, 17}};
  return mixes;
}

std::optional<QuantMix> find_quant_mix(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& mix : quant_mixes())
    if (mix.name == upper) return mix;
  return std::nullopt;
}

std::vector<std::optional<loom_dtype>> mix_tensor_types(const QuantMix& mix, const MixModel& model,
                                                        const std::vector<TensorShape>& tensors) {
  const MixKind k = mix.kind;
  // Counters over the file in order, as llama.cpp keeps them.
  int n_attn_v = 0, i_attn_v = 0, i_ffn_down = 0;
  bool tied_embeddings = true;
  for (const auto& t : tensors) {
    if (category_of(t.name) == Category::attn_v) ++n_attn_v;
    if (t.name == "output.weight") tied_embeddings = false;
  }
  const int n_layers = model.n_layers;
  std::vector<std::optional<loom_dtype>> types;
  for (const auto& t : tensors) {
    int64_t n_rows = 1;
    for (size_t d = 1; d < t.dims.size(); ++d) n_rows *= t.dims[d];
    const bool quantized = n_rows > 1 && t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, "weight") == 0 &&
                           !contains(t.name, "_norm.weight") && !contains(t.name, "ffn_gate_inp.weight");
    if (!quantized) {
      types.push_back(std::nullopt);
      continue;
    }
    loom_dtype type = mix.base;
    const Category c = category_of(t.name);
    if (c == Category::output || (tied_embeddings && c == Category::token_embd)) {
      // The output matrix (and a tied embedding, which is it): Q6_K, or Q8_0 when K-quant blocks do not fit.
      type = t.dims[0] % dtype_traits(mix.base)->block_elems != 0 ? LOOM_DTYPE_Q8_0 : LOOM_DTYPE_Q6_K;
    } else if (c == Category::token_embd) {
      // untied: the base type
    } else if (c == Category::attn_v) {
      if (k == MixKind::q3_k_m) type = i_attn_v < 2 ? LOOM_DTYPE_Q5_K : LOOM_DTYPE_Q4_K;
      else if (k == MixKind::q3_k_l) type = LOOM_DTYPE_Q5_K;
      else if ((k == MixKind::q4_k_m || k == MixKind::q5_k_m) && use_more_bits(i_attn_v, n_attn_v)) type = LOOM_DTYPE_Q6_K;
      else if (k == MixKind::q4_k_s && i_attn_v < 4) type = LOOM_DTYPE_Q5_K;
      ++i_attn_v;
    } else if (c == Category::ffn_down) {
      const int i = i_ffn_down;
      if (k == MixKind::q3_k_m) {
        type = i < n_layers / 16 ? LOOM_DTYPE_Q5_K : LOOM_DTYPE_Q4_K;
      } else if (k == MixKind::q3_k_l) {
        type = LOOM_DTYPE_Q5_K;
      } else if (k == MixKind::q4_k_m) {
        if (use_more_bits(i, n_layers)) type = LOOM_DTYPE_Q6_K;
      } else if (k == MixKind::q5_k_m) {
        if (use_more_bits(i, n_layers)) type = LOOM_DTYPE_Q6_K;
      } else if (k == MixKind::q4_k_s) {
        if (i < n_layers / 8) type = LOOM_DTYPE_Q5_K;
      }
      ++i_ffn_down;
    } else if (c == Category::attn_output) {
      if (k == MixKind::q3_k_m) type = LOOM_DTYPE_Q4_K;
      else if (k == MixKind::q3_k_l) type = LOOM_DTYPE_Q5_K;
    }
    types.push_back(type);
  }
  return types;
}

}  // namespace loom
