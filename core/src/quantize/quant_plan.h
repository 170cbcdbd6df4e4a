// The tensor plan of `loom quantize`: which type each tensor of the input becomes, and why.
//
// Rules, in order:
//   1. Tensors that are not floating-point data (I8..I64, F64) are copied verbatim.
//   2. 1-D tensors (norms, biases; every dim after ne0 is 1) are stored as F32: they are tiny and the
//      ops read norm weights as F32.
//   3. token_embd.weight and output.weight get the embedding type (EmbeddingPolicy): by default Q8_0
//      for the 4-bit targets (Q4_0, Q4_K, I4_G128) and for I8_ROW, the target itself otherwise
//      (Q8_0, Q6_K, F16, BF16). Like llama.cpp, which keeps output.weight at Q6_K (or Q8_0 when the
//      row does not fit K-quants) in its 4-bit mixes: the output projection and the embedding feed
//      every token, so their error is not averaged away over layers, and for a small model
//      (Gemma 3 270M: 168 M of 268 M weights are the tied embedding) most of the quality lives
//      there. Q8_0 rather than Q6_K because Q8_0 fits any row length that is a multiple of 32 (Gemma's
//      640 is not a multiple of 256), and because the Loom-only formats are matmul weights only: no
//      backend gathers embedding rows from I4_G128 or I8_ROW.
//   4. Every other tensor gets the target type.
// A row length (ne0) not divisible by the chosen type's block falls back to Q8_0 (block 32, higher
// precision than every 4- and 6-bit type) or, when 32 does not divide it either, to F16; the plan
// notes the fallback. A tensor whose type already equals its planned type is copied byte for byte
// (re-quantizing an already quantized tensor to the same format can only add error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/dtype.h"

namespace loom {

class Quantizer;

enum class EmbeddingPolicy { automatic, f16, q8_0, same };

// "F16" | "Q8_0" | "same" (case-insensitive); loom::Error listing the choices otherwise.
EmbeddingPolicy parse_embedding_policy(std::string_view text);
std::string embedding_policy_name(EmbeddingPolicy policy);

// The target types `loom quantize --type` accepts, in the order help lists them.
const std::vector<loom_dtype>& quantize_target_types();
// loom::Error listing the accepted names when `text` is not one of them.
loom_dtype parse_quantize_target(std::string_view text);
bool is_loom_only_type(loom_dtype type);  // I4_G128, I8_ROW: no llama.cpp reader knows them

// general.file_type for a file that is mostly `target`: llama.cpp's LLAMA_FTYPE_MOSTLY_* value
// (Q4_K -> 14, "Q4_K_S", the mix whose matrices are all Q4_K), or for the Loom-only types their
// dtype id (1002, 1003), which llama.cpp reports as an unknown file type.
uint32_t file_type_for(loom_dtype target);

struct TensorShape {
  std::string name;
  loom_dtype type = LOOM_DTYPE_F32;
  std::vector<int64_t> dims;  // ne0 first
};

enum class TensorAction { copy, convert };

struct TensorPlan {
  std::string name;
  loom_dtype from = LOOM_DTYPE_F32;
  loom_dtype to = LOOM_DTYPE_F32;
  std::vector<int64_t> dims;
  int64_t n_cols = 0;  // ne0
  int64_t n_rows = 0;  // product of the other dims
  TensorAction action = TensorAction::convert;
  bool is_fallback = false;  // the block size forced a type other than the rule's
  std::string note;          // why it is not the target type, or empty
};

// The embedding type for `target` under `policy`.
loom_dtype embedding_type_for(loom_dtype target, EmbeddingPolicy policy);

// One plan per tensor, in input order. loom::Error when a tensor's type cannot be read.
// `mix_types` (quant_mix.h), when given, replaces rules 3 and 4: entry i is tensor i's type, nullopt
// for a tensor the mix leaves as it is (copied, or converted to F32 when 1-D, as rule 2 says).
// `as_converter` (loom convert, from a Hugging Face folder): tensors already in a block type (a GPTQ /
// AWQ folder's repacked layers, gpt-oss's MXFP4 experts) are copied as they are, and the ones rule 3
// leaves alone (biases, routers) become F32, as llama.cpp's converter writes them. FP8 blocks, which
// only Loom reads, convert like float layers (llama.cpp's converter dequantizes FP8 layers too).
std::vector<TensorPlan> plan_tensors(const std::vector<TensorShape>& tensors, const Quantizer& quantizer,
                                     loom_dtype target, EmbeddingPolicy policy,
                                     const std::vector<std::optional<loom_dtype>>* mix_types = nullptr, bool as_converter = false);

}  // namespace loom
