// Linear layers as GPU serving stacks publish them quantized (config.json's quantization_config):
// GPTQ, AWQ and compressed-tensors keep each weight as packed integers, a zero point and a scale per
// group of input columns. Loom repacks them at load time into the llama.cpp block type that holds
// the same values exactly: the dequantized weight (q - zero) * scale of every element is the
// block's value to the bit (in float32), so the CPU's tuned Q4_0 / Q5_0 / Q8_0 kernels run them.
//
//   symmetric 4-bit (zero 8)            Q4_0: nibble q, d = scale
//   4-bit with zero points              Q5_0: q - zero + 16 in five bits, d = scale
//   symmetric 8-bit (zero 128)          Q8_0: q - 128, d = scale
//
// FP8 checkpoints (quant_method fp8's 128 x 128 blocks; compressed-tensors float-quantized, per
// tensor, per channel or in blocks) become LOOM_DTYPE_F8_E4M3_B32: each run of 32 codes as stored
// with its float32 scale, decoding to weight.float() * scale exactly. Activations stay float: the
// checkpoints' dynamic or static activation quantization is not applied.
//
// A group spans whole blocks of 32 (group sizes that are multiples of 32, or a whole row), and the
// block scale is F16: a scale F16 cannot hold exactly (a compressed-tensors BF16 scale below 2^-14)
// is an error naming the tensor, as is AWQ's GEMV packing. Variants no block type holds (GPTQ's
// act-order g_idx, whose columns share no block scale; asymmetric 8-bit) load as F16 rows of
// (q - zero) * scale, rounded once as the methods' F16 dequantization rounds it: exact, at four
// (act-order 4-bit) or two (8-bit) times the memory of their packing.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hf/safetensors_file.h"
#include "loom/dtype.h"

namespace loom::hf {

struct QuantScheme {
  // mxfp4: gpt-oss's release, whose linear layers are unquantized; its experts' blocks are the
  // family's to repack (gpt_oss_experts.h).
  enum class Method { gptq, awq, compressed_packed, compressed_int8, mxfp4, fp8, compressed_fp8 };
  Method method;
  // FP8: the scale's extent. A block scale covers fp8_block_rows x fp8_block_columns weights; per
  // channel it covers a row, per tensor everything (0: the whole dimension).
  int64_t fp8_block_rows = 0, fp8_block_columns = 0;
  bool fp8_per_channel = false;
  int bits = 4;
  int64_t group_size = 128;  // -1: one group per row
  bool symmetric = true;
  bool gptq_zero_offset = true;  // GPTQ's v1 checkpoints store zero - 1
  std::vector<std::string> ignore;  // compressed-tensors: layers left unquantized
  std::string name() const;
};

// The scheme config.json's quantization_config describes, nullopt without one; loom::Error for a
// method or variant Loom does not read.
std::optional<QuantScheme> quant_scheme_of(const nlohmann::json& config, const std::filesystem::path& dir);

struct RepackedLinear {
  loom_dtype dtype;
  int64_t rows = 0, columns = 0;  // PyTorch's [out, in]
  std::vector<uint8_t> bytes;     // rows of blocks
};

// The linear layer `stem` (e.g. "model.layers.0.self_attn.q_proj") repacked, or nullopt when the
// checkpoint stores no quantized tensors under that stem. `find` looks a tensor up by name.
// `allow_q4_0` false: 4-bit layers take Q5_0 even when symmetric (Q5_0 holds them exactly too), so that
// a MoE layer's experts, stacked into one tensor, share one block type.
std::optional<RepackedLinear> repack_linear(const QuantScheme& scheme, const std::function<const SafeTensor*(const std::string&)>& find,
                                            const std::string& stem, const std::string& where, bool allow_q4_0 = true);

}  // namespace loom::hf
