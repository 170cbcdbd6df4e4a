#include "hf/folder_tensors.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "hf/gpt_oss_experts.h"
#include "hf/json_file.h"

namespace loom::hf {

namespace {

using Rows = TensorName::Rows;

// A linear layer's weight name ends so; a quantization method keeps its tensors beside the stem.
constexpr std::string_view kWeightSuffix = ".weight";
std::string linear_stem(const std::string& hf_name) { return hf_name.substr(0, hf_name.size() - kWeightSuffix.size()); }

// PyTorch's [out, in] is GGUF's [in, out]; a trailing 1 (Qwen2-MoE's [1, dim] shared-expert gate) goes.
std::vector<int64_t> gguf_dims(const std::vector<int64_t>& shape) {
  std::vector<int64_t> dims(shape.rbegin(), shape.rend());
  while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
  return dims;
}

std::string with_index(std::string pattern, int64_t il) {
  const size_t at = pattern.find("{}");
  return at == std::string::npos ? pattern : pattern.replace(at, 2, std::to_string(il));
}

// llama.cpp's order of a q or k projection's rows (or bias): in each head, row j * half + i of the
// checkpoint (j the half, i the pair) becomes row 2 * i + j. Rows are contiguous, so any dtype moves
// as bytes (a quantized layer's rows of blocks too).
std::vector<uint8_t> interleave_rope_halves(std::span<const uint8_t> data, int64_t rows, int64_t n_heads, const std::string& name,
                                            const std::string& where) {
  if (n_heads <= 0 || rows % (2 * n_heads) != 0)
    throw Error(where + ": tensor '" + name + "' has " + std::to_string(rows) + " rows, not a whole number of heads of " + std::to_string(n_heads));
  const size_t row_bytes = data.size() / size_t(rows);
  const int64_t head = rows / n_heads, half = head / 2;
  std::vector<uint8_t> out(data.size());
  for (int64_t h = 0; h < n_heads; h++)
    for (int64_t j = 0; j < 2; j++)
      for (int64_t i = 0; i < half; i++)
        std::memcpy(out.data() + size_t(h * head + 2 * i + j) * row_bytes, data.data() + size_t(h * head + j * half + i) * row_bytes, row_bytes);
  return out;
}

// 1 + w as F32, from F32, F16 or BF16 values, added as the converter adds it: in F16 for an F16
// checkpoint (torch keeps F16 tensors F16), in float32 otherwise.
std::vector<uint8_t> plus_one_f32(const SafeTensor& t, loom_dtype dtype) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  const std::vector<float> values = dequantize_rows(dtype, t.data, n);
  std::vector<uint8_t> out(values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); i++) {
    float v = values[i] + 1.0f;
    if (dtype == LOOM_DTYPE_F16) v = f16_to_f32(f32_to_f16(v));
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof(float));
  }
  return out;
}

}  // namespace

FolderTensors::FolderTensors(const Family& family, const Wrapper* wrapper, const std::filesystem::path& dir, const nlohmann::json& config,
                             std::optional<QuantScheme> scheme, gguf::GgufWriter& writer, Shards& shards)
    : family_(family), wrapper_(wrapper), dir_(dir), config_(config), scheme_(std::move(scheme)), writer_(writer), shards_(shards) {
  n_heads_ = int64_t(config.value("num_attention_heads", uint64_t(0)));
  n_kv_heads_ = int64_t(config.value("num_key_value_heads", uint64_t(n_heads_)));
  n_experts_ = family.expert_count != nullptr ? int64_t(config_uint(config, dir, family.expert_count)) : 0;
  value_heads_ = value_heads_of(config);
  tiled_ = family.tiles_value_heads ? value_heads_ : ValueHeads{};  // nothing moves without tiling
}

std::vector<std::span<const uint8_t>> FolderTensors::add_all() {
  if (family_.generated != nullptr) {
    for (GeneratedTensor& g : family_.generated(config_)) {
      std::vector<uint8_t> bytes(g.values.size() * sizeof(float));
      std::memcpy(bytes.data(), g.values.data(), bytes.size());
      add_owned(g.gguf, LOOM_DTYPE_F32, {int64_t(g.values.size())}, std::move(bytes));
    }
  }
  const auto n_layers = int64_t(config_uint(config_, dir_, family_.layer_count));
  for (const TensorName& name : family_.tensors) {
    if (std::string(name.hf).find("{}") == std::string::npos) {
      add(name.hf, name.gguf, name);
      continue;
    }
    for (int64_t il = 0; il < n_layers; il++) {
      if (std::string(name.hf).find("{e}") != std::string::npos) add_experts(with_index(name.hf, il), with_index(name.gguf, il));
      else add(with_index(name.hf, il), with_index(name.gguf, il), name);
    }
  }
  return std::move(data_);
}

const SafeTensor* FolderTensors::find(const std::string& hf_name) const {
  const SafeTensor* t = shards_.find(hf_name);
  if (t == nullptr && family_.prefix != nullptr) t = shards_.find(family_.prefix + hf_name);
  for (size_t i = 0; t == nullptr && wrapper_ != nullptr && i < wrapper_->renames.size(); i++) {
    const auto& [from, to] = wrapper_->renames[i];
    if (hf_name.rfind(from, 0) == 0) t = shards_.find(to + hf_name.substr(from.size()));
  }
  return t;
}

loom_dtype FolderTensors::check_dtype(const SafeTensor& t) const {
  const int dtype = safetensors_dtype(t.dtype);
  if (dtype < 0) throw Error(dir_.string() + ": tensor '" + t.name + "' has dtype " + t.dtype + " (Loom reads F32, F16 and BF16 weights)");
  return loom_dtype(dtype);
}

// A tensor whose bytes llama.cpp lays out otherwise than the checkpoint: kept with the file.
void FolderTensors::add_owned(const std::string& gguf_name, loom_dtype dtype, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
  writer_.add_tensor_info(gguf_name, dtype, std::move(dims));
  shards_.rearranged.push_back(std::move(bytes));
  data_.push_back(shards_.rearranged.back());
}

int64_t FolderTensors::heads_of(const TensorName& spec) const {
  return spec.rows == TensorName::Rows::rope_pairs_q ? n_heads_ : n_kv_heads_;
}

std::vector<uint8_t> FolderTensors::value_head_bytes(std::span<const uint8_t> bytes, int64_t rows, int64_t row_elems, size_t elem_bytes, Rows kind) const {
  const int64_t qk_rows = 2 * value_heads_.n_k_heads * value_heads_.k_head_dim;
  switch (kind) {
    case Rows::value_head_qkv_rows:
    case Rows::value_head_conv: return tile_value_head_rows(bytes, rows, qk_rows, value_heads_.v_head_dim, tiled_);
    case Rows::value_head_rows: return tile_value_head_rows(bytes, rows, 0, value_heads_.v_head_dim, tiled_);
    case Rows::qkvz_qkv:
    case Rows::qkvz_z: return split_qkvz(bytes, rows, value_heads_, kind == Rows::qkvz_z);
    case Rows::value_head_scalars: return tile_value_head_rows(bytes, rows, 0, 1, tiled_);
    case Rows::value_head_columns:
      if (elem_bytes == 0 && tiled_.grouped()) throw Error(dir_.string() + ": a quantized out_proj's columns cannot be reordered by value head");
      return tile_value_head_columns(bytes, rows, row_elems / std::max<int64_t>(1, value_heads_.n_v_heads), elem_bytes, tiled_);
    default: return std::vector<uint8_t>(bytes.begin(), bytes.end());
  }
}

void FolderTensors::add_value_heads(const SafeTensor& t, const std::string& gguf_name, const TensorName& spec) {
  const loom_dtype dtype = check_dtype(t);
  std::vector<int64_t> dims = gguf_dims(t.shape);
  if (spec.rows == Rows::value_head_conv) std::erase(dims, 1);  // [channels, 1, kernel]: the converter squeezes
  if (spec.rows == Rows::value_head_a_log) {  // one value per head
    const std::vector<uint8_t> heads = tile_value_head_rows(t.data, dims[0], 0, 1, tiled_);
    return add_owned(gguf_name, LOOM_DTYPE_F32, std::move(dims), negative_exp_f32(dtype, heads, int64_t(heads.size() / dtype_row_bytes(dtype, 1))));
  }
  int64_t rows = 1;
  for (size_t i = 1; i < dims.size(); i++) rows *= dims[i];
  if (spec.rows == Rows::value_head_scalars && dims.size() == 1) rows = dims[0];  // dt_bias: a value per head
  std::vector<uint8_t> bytes = value_head_bytes(t.data, rows, dims[0], dtype_row_bytes(dtype, 1), spec.rows);
  if (spec.rows == Rows::qkvz_qkv || spec.rows == Rows::qkvz_z) dims.back() = int64_t(bytes.size() / dtype_row_bytes(dtype, dims[0]));
  add_owned(gguf_name, dtype, std::move(dims), std::move(bytes));
}

bool FolderTensors::add_quantized(const std::string& hf_name, const std::string& gguf_name, const TensorName& spec) {
  if (!scheme_ || !hf_name.ends_with(kWeightSuffix)) return false;
  const std::string stem = linear_stem(hf_name);
  std::optional<RepackedLinear> linear = repack_linear(*scheme_, finder(), stem, dir_.string());
  if (!linear) return false;
  if (spec.rows == TensorName::Rows::rope_pairs_q || spec.rows == TensorName::Rows::rope_pairs_k)
    linear->bytes = interleave_rope_halves(linear->bytes, linear->rows, heads_of(spec), stem, dir_.string());
  if (spec.rows >= Rows::value_head_qkv_rows && spec.rows <= Rows::qkvz_z) {  // rows of blocks move as bytes
    const size_t row_bytes = linear->bytes.size() / size_t(linear->rows);
    linear->bytes = value_head_bytes(linear->bytes, linear->rows, linear->columns, 0, spec.rows);
    linear->rows = int64_t(linear->bytes.size() / row_bytes);
  }
  add_owned(gguf_name, linear->dtype, {linear->columns, linear->rows}, std::move(linear->bytes));
  return true;
}

// gpt-oss's experts (gpt_oss_experts.h): MXFP4 blocks repacked, gate and up rows and biases split.
void FolderTensors::add_split_experts(const std::string& hf_name, const std::string& gguf_name, const TensorName& spec) {
  const RowSelection which = spec.rows == Rows::mxfp4_even_rows || spec.rows == Rows::even_columns ? RowSelection::even
                             : spec.rows == Rows::mxfp4_odd_rows || spec.rows == Rows::odd_columns ? RowSelection::odd
                                                                                                    : RowSelection::all;
  if (spec.rows == Rows::even_columns || spec.rows == Rows::odd_columns) {
    const SafeTensor* t = find(hf_name);
    if (t == nullptr) throw Error(dir_.string() + ": tensor '" + hf_name + "' is missing from the safetensors");
    const loom_dtype dtype = check_dtype(*t);
    std::vector<int64_t> dims = gguf_dims(t->shape);
    if (dims[0] % 2 != 0) throw Error(dir_.string() + ": tensor '" + hf_name + "' has an odd number of columns to split");
    dims[0] /= 2;
    return add_owned(gguf_name, dtype, std::move(dims), every_other_column(*t, which, dtype_row_bytes(dtype, 1)));
  }
  const SafeTensor* blocks = find(hf_name + "_blocks");
  const SafeTensor* scales = find(hf_name + "_scales");
  if (blocks != nullptr && scales != nullptr) {
    RepackedExperts experts = repack_mxfp4_experts(*blocks, *scales, which, dir_.string());
    return add_owned(gguf_name, LOOM_DTYPE_MXFP4, std::move(experts.dims), std::move(experts.bytes));
  }
  const SafeTensor* plain = find(hf_name);  // a dequantized release
  if (plain == nullptr)
    throw Error(dir_.string() + ": tensor '" + hf_name + "' is missing, as MXFP4 ('_blocks' and '_scales') or unquantized");
  const loom_dtype dtype = check_dtype(*plain);
  RepackedExperts experts = transposed_experts(*plain, which, dtype_row_bytes(dtype, 1), dir_.string());
  add_owned(gguf_name, dtype, std::move(experts.dims), std::move(experts.bytes));
}

void FolderTensors::add(const std::string& hf_name, const std::string& gguf_name, const TensorName& spec) {
  if (spec.rows >= Rows::mxfp4_even_rows) return add_split_experts(hf_name, gguf_name, spec);
  if (add_quantized(hf_name, gguf_name, spec)) return;
  const SafeTensor* t = find(hf_name);
  if (t == nullptr && !spec.required) return;
  if (t == nullptr) throw Error(dir_.string() + ": tensor '" + hf_name + "' is missing from the safetensors");
  if (spec.rows == TensorName::Rows::plus_one) return add_owned(gguf_name, LOOM_DTYPE_F32, gguf_dims(t->shape), plus_one_f32(*t, check_dtype(*t)));
  if (spec.rows == Rows::after_padding_positions) {  // the rows past pad_token_id, in place
    const auto skipped = int64_t(config_uint(config_, dir_, "pad_token_id")) + 1;
    std::vector<int64_t> dims = gguf_dims(t->shape);
    if (dims.size() != 2 || dims[1] <= skipped) throw Error(dir_.string() + ": tensor '" + hf_name + "' has no positions past pad_token_id");
    const size_t row_bytes = t->data.size() / size_t(dims[1]);
    dims[1] -= skipped;
    writer_.add_tensor_info(gguf_name, check_dtype(*t), dims);
    data_.push_back(t->data.subspan(size_t(skipped) * row_bytes));
    return;
  }
  if (spec.rows >= Rows::value_head_qkv_rows && spec.rows <= Rows::qkvz_z) return add_value_heads(*t, gguf_name, spec);
  if (spec.rows != TensorName::Rows::as_stored) {
    const int64_t rows = t->shape.empty() ? 0 : t->shape[0];
    return add_owned(gguf_name, check_dtype(*t), gguf_dims(t->shape), interleave_rope_halves(t->data, rows, heads_of(spec), hf_name, dir_.string()));
  }
  writer_.add_tensor_info(gguf_name, check_dtype(*t), gguf_dims(t->shape));
  data_.push_back(t->data);
}

// transformers 5 saves the experts already stacked: experts.gate_up_proj [n_expert, 2 * ff, dim]
// (gate rows, then up rows, per expert) and experts.down_proj [n_expert, dim, ff], ".weight" or not.
bool FolderTensors::add_fused_experts(const std::string& hf_pattern, const std::string& gguf_name) {
  const size_t at = hf_pattern.find("{e}");
  const std::string matrix = hf_pattern.substr(at + 4, hf_pattern.find('.', at + 4) - (at + 4));  // gate_proj, up_proj, down_proj
  const std::string stem = hf_pattern.substr(0, at) + (matrix == "down_proj" ? "down_proj" : "gate_up_proj");
  const SafeTensor* t = find(stem);
  if (t == nullptr) t = find(stem + ".weight");
  if (t == nullptr) return false;
  if (t->shape.size() != 3 || t->shape[0] != n_experts_ || (matrix != "down_proj" && t->shape[1] % 2 != 0))
    throw Error(dir_.string() + ": tensor '" + t->name + "' is not [" + std::to_string(n_experts_) + " experts, rows, columns]");
  if (matrix == "down_proj") {
    writer_.add_tensor_info(gguf_name, check_dtype(*t), {t->shape[2], t->shape[1], t->shape[0]});
    data_.push_back(t->data);
    return true;
  }
  const size_t half = t->data.size() / size_t(2 * n_experts_), skip = matrix == "gate_proj" ? 0 : half;
  std::vector<uint8_t> rows;
  rows.reserve(half * size_t(n_experts_));
  for (int64_t e = 0; e < n_experts_; e++) {
    const uint8_t* expert = t->data.data() + size_t(e) * 2 * half + skip;
    rows.insert(rows.end(), expert, expert + half);
  }
  add_owned(gguf_name, check_dtype(*t), {t->shape[2], t->shape[1] / 2, t->shape[0]}, std::move(rows));
  return true;
}

// A quantized MoE layer's experts (GPTQ / AWQ / compressed-tensors, one linear layer each): each
// repacked, then stacked; all in one block type (Q5_0 for every 4-bit expert when they would differ).
bool FolderTensors::add_quantized_experts(const std::string& hf_pattern, const std::string& gguf_name) {
  if (!scheme_ || !hf_pattern.ends_with(kWeightSuffix)) return false;
  const size_t at = hf_pattern.find("{e}");
  const std::string stem_pattern = linear_stem(hf_pattern);
  auto stem = [&](int64_t e) { return std::string(stem_pattern).replace(at, 3, std::to_string(e)); };
  for (bool allow_q4_0 : {true, false}) {
    std::vector<RepackedLinear> experts;
    for (int64_t e = 0; e < n_experts_; e++) {
      std::optional<RepackedLinear> r = repack_linear(*scheme_, finder(), stem(e), dir_.string(), allow_q4_0);
      if (!r && e == 0) return false;  // stored unquantized
      if (!r) throw Error(dir_.string() + ": expert " + std::to_string(e) + " of '" + stem_pattern + "' is not quantized as expert 0 is");
      if (!experts.empty() && (r->rows != experts[0].rows || r->columns != experts[0].columns))
        throw Error(dir_.string() + ": '" + stem(e) + "' differs in shape from expert 0's");
      experts.push_back(std::move(*r));
    }
    bool one_type = true;
    for (const RepackedLinear& r : experts) one_type = one_type && r.dtype == experts[0].dtype;
    if (!one_type && allow_q4_0) continue;
    if (!one_type) throw Error(dir_.string() + ": the experts of '" + stem_pattern + "' repack into different types (some act-order or 8-bit with zero points)");
    std::vector<uint8_t> stacked;
    stacked.reserve(experts[0].bytes.size() * experts.size());
    for (const RepackedLinear& r : experts) stacked.insert(stacked.end(), r.bytes.begin(), r.bytes.end());
    add_owned(gguf_name, experts[0].dtype, {experts[0].columns, experts[0].rows, n_experts_}, std::move(stacked));
    return true;
  }
  return false;
}

void FolderTensors::add_experts(const std::string& hf_pattern, const std::string& gguf_name) {
  const size_t at = hf_pattern.find("{e}");
  // No expert 0 under the pattern: the experts are quantized, or saved stacked. An FP8 expert 0:
  // quantized under the plain name.
  const SafeTensor* first = find(std::string(hf_pattern).replace(at, 3, "0"));
  if ((first == nullptr || first->dtype == "F8_E4M3") &&
      (add_quantized_experts(hf_pattern, gguf_name) || add_fused_experts(hf_pattern, gguf_name)))
    return;
  std::vector<const SafeTensor*> experts;
  for (int64_t e = 0; e < n_experts_; e++) {
    const std::string name = std::string(hf_pattern).replace(at, 3, std::to_string(e));
    const SafeTensor* t = find(name);
    if (t == nullptr) throw Error(dir_.string() + ": tensor '" + name + "' is missing from the safetensors");
    if (!experts.empty() && (t->shape != experts[0]->shape || t->dtype != experts[0]->dtype))
      throw Error(dir_.string() + ": tensor '" + name + "' differs in shape or dtype from expert 0's");
    experts.push_back(t);
  }
  if (experts.empty()) throw Error(dir_.string() + ": config.json gives no experts for '" + hf_pattern + "'");
  std::vector<int64_t> dims = gguf_dims(experts[0]->shape);
  dims.push_back(n_experts_);
  std::vector<uint8_t> stacked;
  stacked.reserve(experts[0]->data.size() * experts.size());
  for (const SafeTensor* t : experts) stacked.insert(stacked.end(), t->data.begin(), t->data.end());
  add_owned(gguf_name, check_dtype(*experts[0]), std::move(dims), std::move(stacked));
}

}  // namespace loom::hf
