#include "quantize/quant_plan.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "quantize/quant_mix.h"
#include "quantize/quantizer.h"
#include "quantize/tensor_codec.h"

namespace loom {

namespace {

std::string upper(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Formats of 4 bits or fewer per weight: their embeddings default to Q8_0.
bool is_four_bit(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_Q4_0:
    case LOOM_DTYPE_Q4_1:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K:
    case LOOM_DTYPE_IQ4_NL:
    case LOOM_DTYPE_IQ4_XS:
    case LOOM_DTYPE_MXFP4:
    case LOOM_DTYPE_I4_G128: return true;
    default: return false;
  }
}

bool is_float_data(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_I8:
    case LOOM_DTYPE_I16:
    case LOOM_DTYPE_I32:
    case LOOM_DTYPE_I64:
    case LOOM_DTYPE_F64: return false;
    default: return true;
  }
}

// What a row the format's block does not divide gets instead: llama.cpp's choice
// (tensor_type_fallback) for the GGML types, a block of 32 with a comparable size; Q8_0 otherwise.
loom_dtype fallback_for(loom_dtype wanted) {
  switch (wanted) {
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K: return LOOM_DTYPE_Q4_0;
    case LOOM_DTYPE_Q4_K: return LOOM_DTYPE_Q5_0;
    case LOOM_DTYPE_Q5_K: return LOOM_DTYPE_Q5_1;
    case LOOM_DTYPE_IQ4_XS: return LOOM_DTYPE_IQ4_NL;
    default: return LOOM_DTYPE_Q8_0;
  }
}

bool is_embedding(const std::string& name) { return name == "token_embd.weight" || name == "output.weight"; }

// What llama.cpp's quantizer never touches among 2-D and 3-D tensors: the MoE routers (a rounding
// error there flips which experts run) and anything not named *.weight (gpt-oss's expert biases).
// As llama-quantize leaves them: biases and other non-weights, MoE routers, and BERT's position and
// token-type tables (llama.cpp adds the token-type row to F32 activations as it is stored).
bool is_left_alone(const std::string& name) {
  const bool weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
  return !weight || name.find("ffn_gate_inp.weight") != std::string::npos || name.find("ssm_conv1d.weight") != std::string::npos ||
         name == "position_embd.weight" || name == "token_types.weight";
}

}  // namespace

EmbeddingPolicy parse_embedding_policy(std::string_view text) {
  const std::string s = upper(text);
  if (s == "F16") return EmbeddingPolicy::f16;
  if (s == "Q8_0") return EmbeddingPolicy::q8_0;
  if (s == "SAME") return EmbeddingPolicy::same;
  throw Error("--keep-embeddings: unknown value '" + std::string(text) + "' (allowed: F16, Q8_0, same)");
}

std::string embedding_policy_name(EmbeddingPolicy policy) {
  switch (policy) {
    case EmbeddingPolicy::automatic: return "auto";
    case EmbeddingPolicy::f16: return "F16";
    case EmbeddingPolicy::q8_0: return "Q8_0";
    case EmbeddingPolicy::same: return "same";
  }
  return "?";
}

const std::vector<loom_dtype>& quantize_target_types() {
  static const std::vector<loom_dtype> types = {
      LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q4_1,   LOOM_DTYPE_Q5_0,   LOOM_DTYPE_Q5_1,   LOOM_DTYPE_Q2_K,
      LOOM_DTYPE_Q3_K, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K,   LOOM_DTYPE_Q6_K,   LOOM_DTYPE_IQ4_NL, LOOM_DTYPE_IQ4_XS,
      LOOM_DTYPE_MXFP4, LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_F32,     LOOM_DTYPE_I4_G128, LOOM_DTYPE_I8_ROW};
  return types;
}

loom_dtype parse_quantize_target(std::string_view text) {
  const auto type = dtype_from_name(text);
  const auto& allowed = quantize_target_types();
  if (type && std::find(allowed.begin(), allowed.end(), *type) != allowed.end()) return *type;
  std::string names;
  for (loom_dtype t : allowed) names += (names.empty() ? "" : ", ") + dtype_name(t);
  std::string mixes;
  for (const auto& mix : quant_mixes()) mixes += (mixes.empty() ? "" : ", ") + mix.name;
  throw Error("--type: unknown or unsupported type '" + std::string(text) + "' (allowed: " + names + "; llama.cpp mixes: " + mixes + ")");
}

bool is_loom_only_type(loom_dtype type) { return type == LOOM_DTYPE_I4_G128 || type == LOOM_DTYPE_I8_ROW; }

uint32_t file_type_for(loom_dtype target) {
  switch (target) {
    case LOOM_DTYPE_F32: return 0;    // LLAMA_FTYPE_ALL_F32
    case LOOM_DTYPE_F16: return 1;    // MOSTLY_F16
    case LOOM_DTYPE_Q4_0: return 2;   // MOSTLY_Q4_0
    case LOOM_DTYPE_Q4_1: return 3;   // MOSTLY_Q4_1
    case LOOM_DTYPE_Q8_0: return 7;   // MOSTLY_Q8_0
    case LOOM_DTYPE_Q5_0: return 8;   // MOSTLY_Q5_0
    case LOOM_DTYPE_Q5_1: return 9;   // MOSTLY_Q5_1
    case LOOM_DTYPE_Q2_K: return 10;  // MOSTLY_Q2_K
    case LOOM_DTYPE_Q3_K: return 11;  // MOSTLY_Q3_K_S
    case LOOM_DTYPE_Q4_K: return 14;  // MOSTLY_Q4_K_S
    case LOOM_DTYPE_Q5_K: return 16;  // MOSTLY_Q5_K_S
    case LOOM_DTYPE_Q6_K: return 18;  // MOSTLY_Q6_K
    case LOOM_DTYPE_IQ4_NL: return 25;  // MOSTLY_IQ4_NL
    case LOOM_DTYPE_IQ4_XS: return 30;  // MOSTLY_IQ4_XS
    case LOOM_DTYPE_MXFP4: return 38;   // MOSTLY_MXFP4_MOE
    case LOOM_DTYPE_BF16: return 32;  // MOSTLY_BF16
    default: return static_cast<uint32_t>(target);
  }
}

loom_dtype embedding_type_for(loom_dtype target, EmbeddingPolicy policy) {
  switch (policy) {
    case EmbeddingPolicy::f16: return LOOM_DTYPE_F16;
    case EmbeddingPolicy::q8_0: return LOOM_DTYPE_Q8_0;
    case EmbeddingPolicy::same: return target;
    case EmbeddingPolicy::automatic: break;
  }
  return is_four_bit(target) || target == LOOM_DTYPE_I8_ROW ? LOOM_DTYPE_Q8_0 : target;
}

std::vector<TensorPlan> plan_tensors(const std::vector<TensorShape>& tensors, const Quantizer& quantizer,
                                     loom_dtype target, EmbeddingPolicy policy,
                                     const std::vector<std::optional<loom_dtype>>* mix_types, bool as_converter) {
  const bool is_plain = target == LOOM_DTYPE_F32 || target == LOOM_DTYPE_F16 || target == LOOM_DTYPE_BF16;
  if (!is_plain && !quantizer.has_format(target)) {
    throw Error("the quantizer plugin '" + quantizer.name() + "' has no format " + dtype_name(target));
  }
  std::vector<TensorPlan> plans;
  plans.reserve(tensors.size());
  for (const auto& t : tensors) {
    TensorPlan p;
    p.name = t.name;
    p.from = t.type;
    p.dims = t.dims;
    p.n_cols = t.dims.empty() ? 1 : t.dims[0];
    p.n_rows = 1;
    for (size_t i = 1; i < t.dims.size(); ++i) p.n_rows *= t.dims[i];
    if (!is_float_data(t.type)) {
      p.to = t.type;
      p.action = TensorAction::copy;
      p.note = "not float data: copied";
      plans.push_back(std::move(p));
      continue;
    }
    // FP8 blocks are Loom's own: llama.cpp's converter writes FP8 layers dequantized, in the target type.
    if (as_converter && t.type != LOOM_DTYPE_F32 && t.type != LOOM_DTYPE_F16 && t.type != LOOM_DTYPE_BF16 &&
        t.type != LOOM_DTYPE_F8_E4M3_B32) {
      p.to = t.type;
      p.action = TensorAction::copy;
      p.note = "already in blocks: copied";
      plans.push_back(std::move(p));
      continue;
    }
    if (!can_decode(quantizer, t.type)) {
      throw Error("tensor '" + t.name + "' has type " + dtype_name(t.type) + ", which Loom cannot read");
    }
    loom_dtype wanted = target;
    const size_t index = plans.size();
    if (p.n_rows == 1) {
      wanted = LOOM_DTYPE_F32;
      p.note = "1-D: kept F32";
    } else if (is_left_alone(t.name)) {
      wanted = as_converter ? LOOM_DTYPE_F32 : t.type;
      p.note = "router, bias, position table or short convolution (llama.cpp leaves it): " + std::string(as_converter ? "F32" : "kept " + dtype_name(t.type));
    } else if (mix_types != nullptr) {
      const auto& mixed = mix_types->at(index);
      wanted = mixed ? *mixed : t.type;
      if (!mixed) p.note = "not quantized by the mix: kept " + dtype_name(t.type);
      else if (*mixed != target) p.note = "mix: " + dtype_name(*mixed);
    } else if (is_embedding(t.name)) {
      wanted = embedding_type_for(target, policy);
      if (wanted != target) p.note = "embedding/output: " + dtype_name(wanted);
    }
    p.to = wanted;
    if (!can_encode(quantizer, wanted, p.n_cols)) {
      const loom_dtype fallback = fallback_for(wanted);
      p.to = fallback != wanted && can_encode(quantizer, fallback, p.n_cols) ? fallback : LOOM_DTYPE_F16;
      p.is_fallback = true;
      p.note = "row of " + std::to_string(p.n_cols) + " not divisible by " + dtype_name(wanted) + "'s block: " +
               dtype_name(p.to) + " instead";
    }
    if (p.to == p.from) p.action = TensorAction::copy;
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace loom
