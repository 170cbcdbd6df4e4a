#include "hf/hf_checkpoint.h"

#include <cstring>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string_view>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_writer.h"
#include "hf/hf_family.h"
#include "hf/json_file.h"
#include "hf/gpt_oss_experts.h"
#include "hf/linear_attention.h"
#include "hf/quantized_linear.h"
#include "hf/safetensors_file.h"
#include "hf/tokenizer_json.h"

namespace loom::hf {

namespace {

using nlohmann::json;
using Rows = TensorName::Rows;

// The shards: model.safetensors, or every file model.safetensors.index.json's weight_map names.
std::vector<SafetensorsFile> open_shards(const std::filesystem::path& dir) {
  std::vector<SafetensorsFile> shards;
  if (std::filesystem::exists(dir / "model.safetensors")) {
    shards.push_back(SafetensorsFile::open(dir / "model.safetensors"));
    return shards;
  }
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (!std::filesystem::exists(index)) throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json (Loom reads safetensors weights)");
  const json map = read_json_file(index).value("weight_map", json::object());
  std::set<std::string> files;
  for (const auto& [name, file] : map.items()) {
    if (!file.is_string()) throw Error(index.string() + ": weight_map['" + name + "'] is not a file name");
    files.insert(file.get<std::string>());
  }
  if (files.empty()) throw Error(index.string() + ": weight_map names no files");
  for (const std::string& file : files) {
    if (file.find('/') != std::string::npos || file.find("..") != std::string::npos) throw Error(index.string() + ": shard '" + file + "' is not a file of the folder");
    shards.push_back(SafetensorsFile::open(dir / file));
  }
  return shards;
}

uint64_t config_uint(const json& config, const std::filesystem::path& dir, const char* key) {
  if (!config.contains(key) || !config[key].is_number_unsigned())
    throw Error((dir / "config.json").string() + ": '" + key + "' is missing or not a non-negative integer");
  return config[key].get<uint64_t>();
}

std::string with_index(std::string pattern, int64_t il) {
  const size_t at = pattern.find("{}");
  return at == std::string::npos ? pattern : pattern.replace(at, 2, std::to_string(il));
}

struct Shards {
  std::vector<SafetensorsFile> files;
  std::deque<std::vector<uint8_t>> rearranged;  // tensors whose rows llama.cpp orders otherwise (a deque: spans into it stay valid)
  const SafeTensor* find(const std::string& name) const {
    for (const SafetensorsFile& f : files)
      if (const SafeTensor* t = f.find(name)) return t;
    return nullptr;
  }
};

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

// generation_config.json's recommended sampling as general.sampling.*, as llama.cpp's converter writes
// it (gguf-py's Metadata): temperature, top_k, top_p, min_p, repetition_penalty. The converter skips a
// file it cannot parse ("not all models have valid generation_config.json"), and so does Loom.
void add_generation_config(const std::filesystem::path& dir, gguf::GgufWriter& writer) {
  const std::filesystem::path path = dir / "generation_config.json";
  if (!std::filesystem::exists(path)) return;
  json g;
  try {
    g = read_json_file(path);
  } catch (const Error&) {
    return;
  }
  if (!g.is_object()) return;
  auto number = [&](const char* key) -> std::optional<double> {
    if (!g.contains(key) || !g[key].is_number()) return std::nullopt;
    return g[key].get<double>();
  };
  if (const auto v = number("temperature")) writer.set_float32("general.sampling.temp", float(*v));
  if (g.contains("top_k") && g["top_k"].is_number_integer()) writer.set_int32("general.sampling.top_k", g["top_k"].get<int32_t>());
  if (const auto v = number("top_p")) writer.set_float32("general.sampling.top_p", float(*v));
  if (const auto v = number("min_p")) writer.set_float32("general.sampling.min_p", float(*v));
  if (const auto v = number("repetition_penalty")) writer.set_float32("general.sampling.penalty_repeat", float(*v));
}

gguf::GgufFile open_family(const Family& family, const std::filesystem::path& dir, const json& config, const Wrapper* wrapper = nullptr) {
  auto shards = std::make_shared<Shards>();
  gguf::GgufWriter writer;
  const std::string a = std::string(family.arch) + ".";
  writer.set_string("general.architecture", family.arch);
  writer.set_string("general.name", model_name_of(dir));
  for (const ConfigKey& key : family.keys) {
    if (!key.required && (!config.contains(key.hf) || config[key.hf].is_null())) {
      if (!key.fallback) continue;
      if (key.kind == ConfigKey::Kind::f32) writer.set_float32(a + key.gguf, float(*key.fallback));
      else writer.set_uint32(a + key.gguf, uint32_t(*key.fallback));
      continue;
    }
    if (key.kind == ConfigKey::Kind::f32) {
      if (!config.contains(key.hf) || !config[key.hf].is_number())
        throw Error((dir / "config.json").string() + ": '" + key.hf + "' is missing or not a number");
      writer.set_float32(a + key.gguf, config[key.hf].get<float>());
    } else {
      writer.set_uint32(a + key.gguf, uint32_t(config_uint(config, dir, key.hf)));
    }
  }
  if (family.extra != nullptr) family.extra(dir, config, family.arch, writer);
  add_generation_config(dir, writer);
  const auto n_vocab = int64_t(config_uint(config, dir, "vocab_size"));
  switch (family.tokenizer) {
    case TokenizerKind::wordpiece: add_wordpiece_tokenizer(dir, writer, n_vocab); break;
    case TokenizerKind::bpe: add_bpe_tokenizer(dir, config, writer, n_vocab); break;
  }
  const std::optional<QuantScheme> scheme = quant_scheme_of(config, dir);
  if (scheme && scheme->method == QuantScheme::Method::mxfp4 && std::string_view(family.arch) != "gpt-oss")
    throw Error((dir / "config.json").string() + ": quantization method 'mxfp4' is read for gpt-oss's experts only");
  shards->files = open_shards(dir);  // after config.json and tokenizer.json: their errors come first
  const auto n_heads = int64_t(config.value("num_attention_heads", uint64_t(0)));
  const auto n_kv_heads = int64_t(config.value("num_key_value_heads", uint64_t(n_heads)));

  std::vector<std::span<const uint8_t>> data;
  const int64_t n_experts = family.expert_count != nullptr ? int64_t(config_uint(config, dir, family.expert_count)) : 0;
  auto find = [&](const std::string& hf_name) {
    const SafeTensor* t = shards->find(hf_name);
    if (t == nullptr && family.prefix != nullptr) t = shards->find(family.prefix + hf_name);
    for (size_t i = 0; t == nullptr && wrapper != nullptr && i < wrapper->renames.size(); i++) {
      const auto& [from, to] = wrapper->renames[i];
      if (hf_name.rfind(from, 0) == 0) t = shards->find(to + hf_name.substr(from.size()));
    }
    return t;
  };
  auto check_dtype = [&](const SafeTensor& t) {
    const int dtype = safetensors_dtype(t.dtype);
    if (dtype < 0) throw Error(dir.string() + ": tensor '" + t.name + "' has dtype " + t.dtype + " (Loom reads F32, F16 and BF16 weights)");
    return loom_dtype(dtype);
  };
  // PyTorch's [out, in] is GGUF's [in, out]; a trailing 1 (Qwen2-MoE's [1, dim] shared-expert gate) goes.
  auto gguf_dims = [](const std::vector<int64_t>& shape) {
    std::vector<int64_t> dims(shape.rbegin(), shape.rend());
    while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
    return dims;
  };
  // A tensor whose bytes llama.cpp lays out otherwise than the checkpoint: kept with the file.
  auto add_owned = [&](const std::string& gguf_name, loom_dtype dtype, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
    writer.add_tensor_info(gguf_name, dtype, std::move(dims));
    shards->rearranged.push_back(std::move(bytes));
    data.push_back(shards->rearranged.back());
  };
  auto heads_of = [&](const TensorName& spec) { return spec.rows == TensorName::Rows::rope_pairs_q ? n_heads : n_kv_heads; };
  // Qwen 3.5's linear-attention tensors (linear_attention.h): value heads tiled, A_log as -exp, conv1d squeezed.
  const ValueHeads value_heads = value_heads_of(config);
  const ValueHeads tiled = family.tiles_value_heads ? value_heads : ValueHeads{};  // nothing moves without tiling
  auto value_head_bytes = [&](std::span<const uint8_t> bytes, int64_t rows, int64_t row_elems, size_t elem_bytes, Rows kind) {
    const int64_t qk_rows = 2 * value_heads.n_k_heads * value_heads.k_head_dim;
    switch (kind) {
      case Rows::value_head_qkv_rows:
      case Rows::value_head_conv: return tile_value_head_rows(bytes, rows, qk_rows, value_heads.v_head_dim, tiled);
      case Rows::value_head_rows: return tile_value_head_rows(bytes, rows, 0, value_heads.v_head_dim, tiled);
      case Rows::qkvz_qkv:
      case Rows::qkvz_z: return split_qkvz(bytes, rows, value_heads, kind == Rows::qkvz_z);
      case Rows::value_head_scalars: return tile_value_head_rows(bytes, rows, 0, 1, tiled);
      case Rows::value_head_columns:
        if (elem_bytes == 0 && tiled.grouped()) throw Error(dir.string() + ": a quantized out_proj's columns cannot be reordered by value head");
        return tile_value_head_columns(bytes, rows, row_elems / std::max<int64_t>(1, value_heads.n_v_heads), elem_bytes, tiled);
      default: return std::vector<uint8_t>(bytes.begin(), bytes.end());
    }
  };
  auto add_value_heads = [&](const SafeTensor& t, const std::string& gguf_name, const TensorName& spec) {
    const loom_dtype dtype = check_dtype(t);
    std::vector<int64_t> dims = gguf_dims(t.shape);
    if (spec.rows == Rows::value_head_conv) std::erase(dims, 1);  // [channels, 1, kernel]: the converter squeezes
    if (spec.rows == Rows::value_head_a_log) {  // one value per head
      const std::vector<uint8_t> heads = tile_value_head_rows(t.data, dims[0], 0, 1, tiled);
      return add_owned(gguf_name, LOOM_DTYPE_F32, std::move(dims), negative_exp_f32(dtype, heads, int64_t(heads.size() / dtype_row_bytes(dtype, 1))));
    }
    int64_t rows = 1;
    for (size_t i = 1; i < dims.size(); i++) rows *= dims[i];
    if (spec.rows == Rows::value_head_scalars && dims.size() == 1) rows = dims[0];  // dt_bias: a value per head
    std::vector<uint8_t> bytes = value_head_bytes(t.data, rows, dims[0], dtype_row_bytes(dtype, 1), spec.rows);
    if (spec.rows == Rows::qkvz_qkv || spec.rows == Rows::qkvz_z) dims.back() = int64_t(bytes.size() / dtype_row_bytes(dtype, dims[0]));
    add_owned(gguf_name, dtype, std::move(dims), std::move(bytes));
  };
  // A linear layer stored quantized (GPTQ, AWQ, compressed-tensors): repacked into blocks.
  // A linear layer's weight name without ".weight": where a quantization method keeps its tensors.
  const std::string weight_suffix = ".weight";
  auto linear_stem = [&](const std::string& hf_name) { return hf_name.substr(0, hf_name.size() - weight_suffix.size()); };
  auto add_quantized = [&](const std::string& hf_name, const std::string& gguf_name, const TensorName& spec) {
    if (!scheme || !hf_name.ends_with(weight_suffix)) return false;
    const std::string stem = linear_stem(hf_name);
    std::optional<RepackedLinear> linear = repack_linear(*scheme, find, stem, dir.string());
    if (!linear) return false;
    if (spec.rows == TensorName::Rows::rope_pairs_q || spec.rows == TensorName::Rows::rope_pairs_k)
      linear->bytes = interleave_rope_halves(linear->bytes, linear->rows, heads_of(spec), stem, dir.string());
    if (spec.rows >= Rows::value_head_qkv_rows && spec.rows <= Rows::qkvz_z) {  // rows of blocks move as bytes
      const size_t row_bytes = linear->bytes.size() / size_t(linear->rows);
      linear->bytes = value_head_bytes(linear->bytes, linear->rows, linear->columns, 0, spec.rows);
      linear->rows = int64_t(linear->bytes.size() / row_bytes);
    }
    add_owned(gguf_name, linear->dtype, {linear->columns, linear->rows}, std::move(linear->bytes));
    return true;
  };
  // gpt-oss's experts (gpt_oss_experts.h): MXFP4 blocks repacked, gate and up rows and biases split.
  auto add_split_experts = [&](const std::string& hf_name, const std::string& gguf_name, const TensorName& spec) {
    const RowSelection which = spec.rows == Rows::mxfp4_even_rows || spec.rows == Rows::even_columns ? RowSelection::even
                               : spec.rows == Rows::mxfp4_odd_rows || spec.rows == Rows::odd_columns ? RowSelection::odd
                                                                                                      : RowSelection::all;
    if (spec.rows == Rows::even_columns || spec.rows == Rows::odd_columns) {
      const SafeTensor* t = find(hf_name);
      if (t == nullptr) throw Error(dir.string() + ": tensor '" + hf_name + "' is missing from the safetensors");
      const loom_dtype dtype = check_dtype(*t);
      std::vector<int64_t> dims = gguf_dims(t->shape);
      if (dims[0] % 2 != 0) throw Error(dir.string() + ": tensor '" + hf_name + "' has an odd number of columns to split");
      dims[0] /= 2;
      return add_owned(gguf_name, dtype, std::move(dims), every_other_column(*t, which, dtype_row_bytes(dtype, 1)));
    }
    const SafeTensor* blocks = find(hf_name + "_blocks");
    const SafeTensor* scales = find(hf_name + "_scales");
    if (blocks != nullptr && scales != nullptr) {
      RepackedExperts experts = repack_mxfp4_experts(*blocks, *scales, which, dir.string());
      return add_owned(gguf_name, LOOM_DTYPE_MXFP4, std::move(experts.dims), std::move(experts.bytes));
    }
    const SafeTensor* plain = find(hf_name);  // a dequantized release
    if (plain == nullptr)
      throw Error(dir.string() + ": tensor '" + hf_name + "' is missing, as MXFP4 ('_blocks' and '_scales') or unquantized");
    const loom_dtype dtype = check_dtype(*plain);
    RepackedExperts experts = transposed_experts(*plain, which, dtype_row_bytes(dtype, 1), dir.string());
    add_owned(gguf_name, dtype, std::move(experts.dims), std::move(experts.bytes));
  };
  auto add = [&](const std::string& hf_name, const std::string& gguf_name, const TensorName& spec) {
    if (spec.rows >= Rows::mxfp4_even_rows) return add_split_experts(hf_name, gguf_name, spec);
    if (add_quantized(hf_name, gguf_name, spec)) return;
    const SafeTensor* t = find(hf_name);
    if (t == nullptr && !spec.required) return;
    if (t == nullptr) throw Error(dir.string() + ": tensor '" + hf_name + "' is missing from the safetensors");
    if (spec.rows == TensorName::Rows::plus_one) return add_owned(gguf_name, LOOM_DTYPE_F32, gguf_dims(t->shape), plus_one_f32(*t, check_dtype(*t)));
    if (spec.rows == Rows::after_padding_positions) {  // the rows past pad_token_id, in place
      const auto skipped = int64_t(config_uint(config, dir, "pad_token_id")) + 1;
      std::vector<int64_t> dims = gguf_dims(t->shape);
      if (dims.size() != 2 || dims[1] <= skipped) throw Error(dir.string() + ": tensor '" + hf_name + "' has no positions past pad_token_id");
      const size_t row_bytes = t->data.size() / size_t(dims[1]);
      dims[1] -= skipped;
      writer.add_tensor_info(gguf_name, check_dtype(*t), dims);
      data.push_back(t->data.subspan(size_t(skipped) * row_bytes));
      return;
    }
    if (spec.rows >= Rows::value_head_qkv_rows && spec.rows <= Rows::qkvz_z) return add_value_heads(*t, gguf_name, spec);
    if (spec.rows != TensorName::Rows::as_stored) {
      const int64_t rows = t->shape.empty() ? 0 : t->shape[0];
      return add_owned(gguf_name, check_dtype(*t), gguf_dims(t->shape), interleave_rope_halves(t->data, rows, heads_of(spec), hf_name, dir.string()));
    }
    writer.add_tensor_info(gguf_name, check_dtype(*t), gguf_dims(t->shape));
    data.push_back(t->data);
  };
  // transformers 5 saves the experts already stacked: experts.gate_up_proj [n_expert, 2 * ff, dim]
  // (gate rows, then up rows, per expert) and experts.down_proj [n_expert, dim, ff], ".weight" or not.
  auto add_fused_experts = [&](const std::string& hf_pattern, const std::string& gguf_name) {
    const size_t at = hf_pattern.find("{e}");
    const std::string matrix = hf_pattern.substr(at + 4, hf_pattern.find('.', at + 4) - (at + 4));  // gate_proj, up_proj, down_proj
    const std::string stem = hf_pattern.substr(0, at) + (matrix == "down_proj" ? "down_proj" : "gate_up_proj");
    const SafeTensor* t = find(stem);
    if (t == nullptr) t = find(stem + ".weight");
    if (t == nullptr) return false;
    if (t->shape.size() != 3 || t->shape[0] != n_experts || (matrix != "down_proj" && t->shape[1] % 2 != 0))
      throw Error(dir.string() + ": tensor '" + t->name + "' is not [" + std::to_string(n_experts) + " experts, rows, columns]");
    if (matrix == "down_proj") {
      writer.add_tensor_info(gguf_name, check_dtype(*t), {t->shape[2], t->shape[1], t->shape[0]});
      data.push_back(t->data);
      return true;
    }
    const size_t half = t->data.size() / size_t(2 * n_experts), skip = matrix == "gate_proj" ? 0 : half;
    std::vector<uint8_t> rows;
    rows.reserve(half * size_t(n_experts));
    for (int64_t e = 0; e < n_experts; e++) {
      const uint8_t* expert = t->data.data() + size_t(e) * 2 * half + skip;
      rows.insert(rows.end(), expert, expert + half);
    }
    add_owned(gguf_name, check_dtype(*t), {t->shape[2], t->shape[1] / 2, t->shape[0]}, std::move(rows));
    return true;
  };
  // A quantized MoE layer's experts (GPTQ / AWQ / compressed-tensors, one linear layer each): each
  // repacked, then stacked; all in one block type (Q5_0 for every 4-bit expert when they would differ).
  auto add_quantized_experts = [&](const std::string& hf_pattern, const std::string& gguf_name) {
    if (!scheme || !hf_pattern.ends_with(weight_suffix)) return false;
    const size_t at = hf_pattern.find("{e}");
    const std::string stem_pattern = linear_stem(hf_pattern);
    auto stem = [&](int64_t e) { return std::string(stem_pattern).replace(at, 3, std::to_string(e)); };
    for (bool allow_q4_0 : {true, false}) {
      std::vector<RepackedLinear> experts;
      for (int64_t e = 0; e < n_experts; e++) {
        std::optional<RepackedLinear> r = repack_linear(*scheme, find, stem(e), dir.string(), allow_q4_0);
        if (!r && e == 0) return false;  // stored unquantized
        if (!r) throw Error(dir.string() + ": expert " + std::to_string(e) + " of '" + stem_pattern + "' is not quantized as expert 0 is");
        if (!experts.empty() && (r->rows != experts[0].rows || r->columns != experts[0].columns))
          throw Error(dir.string() + ": '" + stem(e) + "' differs in shape from expert 0's");
        experts.push_back(std::move(*r));
      }
      bool one_type = true;
      for (const RepackedLinear& r : experts) one_type = one_type && r.dtype == experts[0].dtype;
      if (!one_type && allow_q4_0) continue;
      if (!one_type) throw Error(dir.string() + ": the experts of '" + stem_pattern + "' repack into different types (some act-order or 8-bit with zero points)");
      std::vector<uint8_t> stacked;
      stacked.reserve(experts[0].bytes.size() * experts.size());
      for (const RepackedLinear& r : experts) stacked.insert(stacked.end(), r.bytes.begin(), r.bytes.end());
      add_owned(gguf_name, experts[0].dtype, {experts[0].columns, experts[0].rows, n_experts}, std::move(stacked));
      return true;
    }
    return false;
  };
  auto add_experts = [&](const std::string& hf_pattern, const std::string& gguf_name) {
    const size_t at = hf_pattern.find("{e}");
    // No expert 0 under the pattern: the experts are quantized, or saved stacked. An FP8 expert 0:
    // quantized under the plain name.
    const SafeTensor* first = find(std::string(hf_pattern).replace(at, 3, "0"));
    if ((first == nullptr || first->dtype == "F8_E4M3") &&
        (add_quantized_experts(hf_pattern, gguf_name) || add_fused_experts(hf_pattern, gguf_name)))
      return;
    std::vector<const SafeTensor*> experts;
    for (int64_t e = 0; e < n_experts; e++) {
      const std::string name = std::string(hf_pattern).replace(at, 3, std::to_string(e));
      const SafeTensor* t = find(name);
      if (t == nullptr) throw Error(dir.string() + ": tensor '" + name + "' is missing from the safetensors");
      if (!experts.empty() && (t->shape != experts[0]->shape || t->dtype != experts[0]->dtype))
        throw Error(dir.string() + ": tensor '" + name + "' differs in shape or dtype from expert 0's");
      experts.push_back(t);
    }
    if (experts.empty()) throw Error(dir.string() + ": config.json gives no experts for '" + hf_pattern + "'");
    std::vector<int64_t> dims = gguf_dims(experts[0]->shape);
    dims.push_back(n_experts);
    std::vector<uint8_t> stacked;
    stacked.reserve(experts[0]->data.size() * experts.size());
    for (const SafeTensor* t : experts) stacked.insert(stacked.end(), t->data.begin(), t->data.end());
    add_owned(gguf_name, check_dtype(*experts[0]), std::move(dims), std::move(stacked));
  };
  if (family.generated != nullptr) {
    for (GeneratedTensor& g : family.generated(config)) {
      std::vector<uint8_t> bytes(g.values.size() * sizeof(float));
      std::memcpy(bytes.data(), g.values.data(), bytes.size());
      add_owned(g.gguf, LOOM_DTYPE_F32, {int64_t(g.values.size())}, std::move(bytes));
    }
  }
  const auto n_layers = int64_t(config_uint(config, dir, family.layer_count));
  for (const TensorName& name : family.tensors) {
    if (std::string(name.hf).find("{}") == std::string::npos) {
      add(name.hf, name.gguf, name);
      continue;
    }
    for (int64_t il = 0; il < n_layers; il++) {
      if (std::string(name.hf).find("{e}") != std::string::npos) add_experts(with_index(name.hf, il), with_index(name.gguf, il));
      else add(with_index(name.hf, il), with_index(name.gguf, il), name);
    }
  }
  return gguf::GgufFile::with_external_data(writer.to_header_bytes(), std::move(data), shards, dir.string());
}

}  // namespace

bool is_checkpoint_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(path / "config.json", ec);
}

gguf::GgufFile open_checkpoint(const std::filesystem::path& dir) {
  if (!is_checkpoint_dir(dir)) throw Error(dir.string() + ": not a Hugging Face model folder (no config.json)");
  const json config = read_json_file(dir / "config.json");
  std::string type;
  try {
    type = config.value("model_type", std::string());
    if (const Family* family = find_family(type)) return open_family(*family, dir, config);
    if (const Wrapper* wrapper = find_wrapper(type)) {
      // The text model's config: the class defaults, then config.json's own keys (token ids, dtype),
      // then its text_config.
      json text = json::parse(wrapper->text_defaults);
      for (const auto& [key, value] : config.items())
        if (key != "text_config" && key != "vision_config" && key != "audio_config") text[key] = value;
      if (config.contains("text_config") && config["text_config"].is_object()) text.update(config["text_config"]);
      text["model_type"] = wrapper->text_model_type;
      return open_family(*find_family(wrapper->text_model_type), dir, text, wrapper);
    }
  } catch (const json::exception& e) {
    // A value of the wrong kind in config.json, tokenizer.json or tokenizer_config.json (a string where a
    // number belongs, a null list): the tables read them with nlohmann's typed accessors.
    throw Error(dir.string() + ": a value of the wrong type in its JSON files (" + e.what() + ")");
  }
  throw Error((dir / "config.json").string() + ": model_type '" + type + "' is not one Loom reads from a Hugging Face folder yet (" + family_names() +
              "); convert it with llama.cpp's convert_hf_to_gguf.py");
}

std::string model_name_of(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path.stem().string();
  std::filesystem::path p = path.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.filename() == "." || p.filename().empty()) p = std::filesystem::absolute(p, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

gguf::GgufFile open_model_file(const std::filesystem::path& path) {
  return is_checkpoint_dir(path) ? open_checkpoint(path) : gguf::GgufFile::open(path);
}

}  // namespace loom::hf
