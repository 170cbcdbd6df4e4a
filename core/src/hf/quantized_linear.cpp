#include "hf/quantized_linear.h"

#include <cctype>
#include <cstring>

#include "common/error.h"
#include "gguf/block_quantize.h"

namespace loom::hf {

namespace {

using nlohmann::json;

// One linear layer's integers, whatever the method's packing: code[o * columns + i] (unsigned, as
// stored), and per (row, group) the zero point and the scale as F16 bits. Element (o, i) is
// (code - zero) * scale.
struct IntegerWeights {
  int64_t rows = 0, columns = 0, group_size = 0;
  std::vector<uint8_t> code;
  std::vector<int32_t> zero;
  std::vector<uint16_t> scale;
  // GPTQ's act-order (desc_act): column i belongs to group column_group[i]; empty: i / group_size.
  std::vector<int32_t> column_group;
  int64_t groups() const { return (columns + group_size - 1) / group_size; }
  int64_t group_of(int64_t column) const { return column_group.empty() ? column / group_size : column_group[size_t(column)]; }
};

int32_t int32_at(const SafeTensor& t, int64_t index) {
  int32_t v;
  std::memcpy(&v, t.data.data() + size_t(index) * 4, 4);
  return v;
}

const SafeTensor& need(const std::function<const SafeTensor*(const std::string&)>& find, const std::string& name, const std::string& where) {
  const SafeTensor* t = find(name);
  if (t == nullptr) throw Error(where + ": tensor '" + name + "' is missing from the safetensors");
  return *t;
}

void expect(const SafeTensor& t, const char* dtype, const std::vector<int64_t>& shape, const std::string& where) {
  if (t.dtype != dtype || t.shape != shape) {
    std::string want;
    for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
    throw Error(where + ": tensor '" + t.name + "' should be " + dtype + " [" + want + "] for this quantization");
  }
}

// A scale as F16 bits: F16 as stored; BF16 and F32 only where F16 holds the value exactly.
uint16_t scale_bits(const SafeTensor& t, int64_t index, const std::string& where) {
  uint16_t h;
  if (t.dtype == "F16") {
    std::memcpy(&h, t.data.data() + size_t(index) * 2, 2);
    return h;
  }
  float f;
  if (t.dtype == "BF16") {
    uint16_t b;
    std::memcpy(&b, t.data.data() + size_t(index) * 2, 2);
    f = bf16_to_f32(b);
  } else if (t.dtype == "F32") {
    std::memcpy(&f, t.data.data() + size_t(index) * 4, 4);
  } else {
    throw Error(where + ": tensor '" + t.name + "' has dtype " + t.dtype + " (scales are F16, BF16 or F32)");
  }
  h = f32_to_f16(f);
  if (f16_to_f32(h) != f)
    throw Error(where + ": tensor '" + t.name + "' holds a scale (" + std::to_string(f) +
                ") that F16 cannot hold exactly, so no llama.cpp block type keeps this layer's values");
  return h;
}

int64_t group_size_for(const QuantScheme& scheme, int64_t columns) { return scheme.group_size < 0 ? columns : scheme.group_size; }

// GPTQ (AutoGPTQ / GPTQModel's "gptq" format): qweight [columns * bits / 32, rows], input columns
// packed low bits first; qzeros [groups, rows * bits / 32], output rows packed the same way, each
// zero stored minus one in the v1 format; scales F16 [groups, rows]; g_idx [columns], the group of
// each input column, which must be the plain i / group_size (act-order checkpoints reorder it).
IntegerWeights gptq_integers(const QuantScheme& s, const std::function<const SafeTensor*(const std::string&)>& find, const std::string& stem,
                             const std::string& where) {
  const SafeTensor& qweight = need(find, stem + ".qweight", where);
  const int per_word = 32 / s.bits;
  const uint32_t mask = (1u << s.bits) - 1;
  if (qweight.dtype != "I32" || qweight.shape.size() != 2) throw Error(where + ": tensor '" + qweight.name + "' should be I32 [packed columns, rows]");
  IntegerWeights w;
  w.rows = qweight.shape[1], w.columns = qweight.shape[0] * per_word, w.group_size = group_size_for(s, w.columns);
  const int64_t groups = w.groups();
  const SafeTensor& scales = need(find, stem + ".scales", where);
  const SafeTensor& qzeros = need(find, stem + ".qzeros", where);
  expect(scales, "F16", {groups, w.rows}, where);
  expect(qzeros, "I32", {groups, (w.rows + per_word - 1) / per_word}, where);
  if (const SafeTensor* g_idx = find(stem + ".g_idx")) {
    expect(*g_idx, "I32", {w.columns}, where);
    bool reordered = false;
    for (int64_t i = 0; i < w.columns; i++) reordered = reordered || int32_at(*g_idx, i) != i / w.group_size;
    if (reordered) {  // act-order: each column's group as g_idx says
      w.column_group.resize(size_t(w.columns));
      for (int64_t i = 0; i < w.columns; i++) {
        w.column_group[size_t(i)] = int32_at(*g_idx, i);
        if (w.column_group[size_t(i)] < 0 || w.column_group[size_t(i)] >= groups)
          throw Error(where + ": tensor '" + g_idx->name + "' puts column " + std::to_string(i) + " in group " +
                      std::to_string(w.column_group[size_t(i)]) + " of " + std::to_string(groups));
      }
    }
  }
  w.code.resize(size_t(w.rows * w.columns));
  for (int64_t i = 0; i < w.columns; i++)
    for (int64_t o = 0; o < w.rows; o++)
      w.code[size_t(o * w.columns + i)] = uint8_t((uint32_t(int32_at(qweight, (i / per_word) * w.rows + o)) >> (s.bits * (i % per_word))) & mask);
  const int64_t zero_words = qzeros.shape[1];
  w.zero.resize(size_t(w.rows * groups));
  w.scale.resize(size_t(w.rows * groups));
  for (int64_t g = 0; g < groups; g++)
    for (int64_t o = 0; o < w.rows; o++) {
      const uint32_t stored = (uint32_t(int32_at(qzeros, g * zero_words + o / per_word)) >> (s.bits * (o % per_word))) & mask;
      w.zero[size_t(o * groups + g)] = int32_t(stored) + (s.gptq_zero_offset ? 1 : 0);
      w.scale[size_t(o * groups + g)] = scale_bits(scales, g * w.rows + o, where);
    }
  return w;
}

// AWQ (AutoAWQ's GEMM format): qweight [columns, rows / 8] and qzeros [groups, rows / 8], eight
// output rows per int32 in the order 0, 2, 4, 6, 1, 3, 5, 7 (AutoAWQ's order_map: slot j holds row
// order_map[j]; kAwqSlotOfRow is its inverse); scales F16 [groups, rows].
constexpr int kAwqSlotOfRow[8] = {0, 4, 1, 5, 2, 6, 3, 7};
IntegerWeights awq_integers(const QuantScheme& s, const std::function<const SafeTensor*(const std::string&)>& find, const std::string& stem,
                            const std::string& where) {
  const SafeTensor& qweight = need(find, stem + ".qweight", where);
  if (qweight.dtype != "I32" || qweight.shape.size() != 2) throw Error(where + ": tensor '" + qweight.name + "' should be I32 [columns, packed rows]");
  IntegerWeights w;
  w.rows = qweight.shape[1] * 8, w.columns = qweight.shape[0], w.group_size = group_size_for(s, w.columns);
  const int64_t groups = w.groups(), words = qweight.shape[1];
  const SafeTensor& scales = need(find, stem + ".scales", where);
  const SafeTensor& qzeros = need(find, stem + ".qzeros", where);
  expect(scales, "F16", {groups, w.rows}, where);
  expect(qzeros, "I32", {groups, words}, where);
  auto nibble = [&](const SafeTensor& t, int64_t line, int64_t o) {
    return uint8_t((uint32_t(int32_at(t, line * words + o / 8)) >> (4 * kAwqSlotOfRow[o % 8])) & 0xF);
  };
  w.code.resize(size_t(w.rows * w.columns));
  for (int64_t i = 0; i < w.columns; i++)
    for (int64_t o = 0; o < w.rows; o++) w.code[size_t(o * w.columns + i)] = nibble(qweight, i, o);
  w.zero.resize(size_t(w.rows * groups));
  w.scale.resize(size_t(w.rows * groups));
  for (int64_t g = 0; g < groups; g++)
    for (int64_t o = 0; o < w.rows; o++) {
      w.zero[size_t(o * groups + g)] = nibble(qzeros, g, o);
      w.scale[size_t(o * groups + g)] = scale_bits(scales, g * w.rows + o, where);
    }
  return w;
}

// compressed-tensors' pack-quantized format: weight_packed I32 [rows, columns * bits / 32], input
// columns packed low bits first, each value stored plus 2^(bits-1); weight_scale [rows, groups];
// weight_shape [2] = (rows, columns). Its int-quantized format: weight I8 [rows, columns].
IntegerWeights compressed_integers(const QuantScheme& s, const std::function<const SafeTensor*(const std::string&)>& find, const std::string& stem,
                                   const std::string& where) {
  IntegerWeights w;
  const int32_t offset = 1 << (s.bits - 1);
  const bool packed = s.method == QuantScheme::Method::compressed_packed;
  const SafeTensor& values = need(find, stem + (packed ? ".weight_packed" : ".weight"), where);
  if (packed) {
    const int per_word = 32 / s.bits;
    if (values.dtype != "I32" || values.shape.size() != 2) throw Error(where + ": tensor '" + values.name + "' should be I32 [rows, packed columns]");
    w.rows = values.shape[0], w.columns = values.shape[1] * per_word;
    if (const SafeTensor* shape = find(stem + ".weight_shape")) {  // the unpadded columns
      if (shape->shape != std::vector<int64_t>{2} || (shape->dtype != "I32" && shape->dtype != "I64"))
        throw Error(where + ": tensor '" + shape->name + "' should be two integers");
      auto at = [&](int64_t k) {
        int64_t v = 0;
        std::memcpy(&v, shape->data.data() + size_t(k) * (shape->dtype == "I32" ? 4 : 8), shape->dtype == "I32" ? 4 : 8);
        return shape->dtype == "I32" ? int64_t(int32_t(v)) : v;
      };
      if (at(0) != w.rows || at(1) > w.columns || at(1) <= w.columns - per_word)
        throw Error(where + ": tensor '" + shape->name + "' does not match '" + values.name + "'");
      w.columns = at(1);
    }
    const uint32_t mask = (1u << s.bits) - 1;
    w.code.resize(size_t(w.rows * w.columns));
    for (int64_t o = 0; o < w.rows; o++)
      for (int64_t i = 0; i < w.columns; i++)
        w.code[size_t(o * w.columns + i)] = uint8_t((uint32_t(int32_at(values, o * values.shape[1] + i / per_word)) >> (s.bits * (i % per_word))) & mask);
  } else {
    if (values.dtype != "I8" || values.shape.size() != 2) throw Error(where + ": tensor '" + values.name + "' should be I8 [rows, columns]");
    w.rows = values.shape[0], w.columns = values.shape[1];
    w.code.resize(size_t(w.rows * w.columns));
    for (size_t k = 0; k < w.code.size(); k++) w.code[k] = uint8_t(int32_t(int8_t(values.data[k])) + offset);
  }
  w.group_size = group_size_for(s, w.columns);
  const int64_t groups = w.groups();
  const SafeTensor& scales = need(find, stem + ".weight_scale", where);
  if (scales.shape != std::vector<int64_t>{w.rows, groups}) throw Error(where + ": tensor '" + scales.name + "' should be [" +
                                                                       std::to_string(w.rows) + ", " + std::to_string(groups) + "]");
  w.zero.assign(size_t(w.rows * groups), offset);
  w.scale.resize(size_t(w.rows * groups));
  for (int64_t k = 0; k < w.rows * groups; k++) w.scale[size_t(k)] = scale_bits(scales, k, where);
  return w;
}

// Variants whose columns share no block scale (act-order) or no block type holds (8-bit with zero
// points): F16 rows of (q - zero) * scale, exact in float32 (at most 9 + 11 significant bits) and
// rounded once, as the methods' own F16 dequantization rounds it.
RepackedLinear to_f16(const IntegerWeights& w) {
  RepackedLinear out;
  out.dtype = LOOM_DTYPE_F16;
  out.rows = w.rows, out.columns = w.columns;
  out.bytes.resize(size_t(w.rows * w.columns) * 2);
  const int64_t groups = w.groups();
  for (int64_t o = 0; o < w.rows; o++)
    for (int64_t i = 0; i < w.columns; i++) {
      const int64_t g = w.group_of(i);
      const float value = float(int32_t(w.code[size_t(o * w.columns + i)]) - w.zero[size_t(o * groups + g)]) * f16_to_f32(w.scale[size_t(o * groups + g)]);
      const uint16_t h = f32_to_f16(value);
      std::memcpy(out.bytes.data() + size_t(o * w.columns + i) * 2, &h, 2);
    }
  return out;
}

// The integers as rows of Q4_0, Q5_0 or Q8_0 blocks (see the header's table), or F16 (to_f16).
RepackedLinear to_blocks(const IntegerWeights& w, int bits, const std::string& stem, const std::string& where, bool allow_q4_0) {
  if (!w.column_group.empty()) return to_f16(w);
  if (w.columns % 32 != 0 || (w.group_size % 32 != 0 && w.group_size != w.columns))
    throw Error(where + ": '" + stem + "' has " + std::to_string(w.columns) + " columns in groups of " + std::to_string(w.group_size) +
                ": a group must span whole blocks of 32");
  const int32_t symmetric_zero = 1 << (bits - 1);
  bool symmetric = true;
  for (int32_t z : w.zero) symmetric = symmetric && z == symmetric_zero;
  RepackedLinear out;
  out.rows = w.rows, out.columns = w.columns;
  const int64_t blocks = w.columns / 32, groups = w.groups();
  if (bits == 8 && !symmetric) return to_f16(w);
  out.dtype = bits == 8 ? LOOM_DTYPE_Q8_0 : symmetric && allow_q4_0 ? LOOM_DTYPE_Q4_0 : LOOM_DTYPE_Q5_0;
  const size_t block_bytes = out.dtype == LOOM_DTYPE_Q8_0 ? sizeof(loom_block_q8_0) : out.dtype == LOOM_DTYPE_Q4_0 ? sizeof(loom_block_q4_0) : sizeof(loom_block_q5_0);
  out.bytes.resize(size_t(w.rows * blocks) * block_bytes);
  for (int64_t o = 0; o < w.rows; o++) {
    for (int64_t b = 0; b < blocks; b++) {
      const int64_t g = b * 32 / w.group_size;
      const uint16_t d = w.scale[size_t(o * groups + g)];
      const int32_t zero = w.zero[size_t(o * groups + g)];
      const uint8_t* q = w.code.data() + o * w.columns + b * 32;
      uint8_t* block = out.bytes.data() + size_t(o * blocks + b) * block_bytes;
      if (out.dtype == LOOM_DTYPE_Q8_0) {
        loom_block_q8_0 y{};
        y.d = d;
        for (int j = 0; j < 32; j++) y.qs[j] = int8_t(int32_t(q[j]) - zero);
        std::memcpy(block, &y, sizeof y);
      } else if (out.dtype == LOOM_DTYPE_Q4_0) {
        loom_block_q4_0 y{};
        y.d = d;
        for (int j = 0; j < 16; j++) y.qs[j] = uint8_t(q[j] | (q[j + 16] << 4));
        std::memcpy(block, &y, sizeof y);
      } else {
        loom_block_q5_0 y{};
        y.d = d;
        uint32_t high = 0;
        uint8_t v[32];
        for (int j = 0; j < 32; j++) {
          const int32_t shifted = int32_t(q[j]) - zero + 16;
          if (shifted < 0 || shifted > 31)
            throw Error(where + ": '" + stem + "' has a zero point (" + std::to_string(zero) + ") outside the 4-bit range");
          v[j] = uint8_t(shifted);
          high |= uint32_t(v[j] >> 4) << j;
        }
        for (int j = 0; j < 16; j++) y.qs[j] = uint8_t((v[j] & 0xF) | ((v[j + 16] & 0xF) << 4));
        std::memcpy(y.qh, &high, 4);
        std::memcpy(block, &y, sizeof y);
      }
    }
  }
  return out;
}

// A scale as float32: F32, BF16 and F16 all convert exactly.
float float_scale_at(const SafeTensor& t, int64_t index, const std::string& where) {
  if (t.dtype == "F32") {
    float f;
    std::memcpy(&f, t.data.data() + size_t(index) * 4, 4);
    return f;
  }
  uint16_t h;
  if (t.dtype != "BF16" && t.dtype != "F16") throw Error(where + ": tensor '" + t.name + "' has dtype " + t.dtype + " (scales are F32, BF16 or F16)");
  std::memcpy(&h, t.data.data() + size_t(index) * 2, 2);
  return t.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// FP8: weight F8_E4M3 [rows, columns] beside its scale: quant_method fp8's weight_scale_inv
// [ceil(rows / 128), ceil(columns / 128)] (a multiplier despite the name, as DeepSeek's and
// transformers' dequantization use it), compressed-tensors' weight_scale [1] (per tensor), [rows, 1]
// (per channel) or blocks like fp8's. Each run of 32 codes keeps its bytes and takes its scale.
RepackedLinear fp8_blocks(const QuantScheme& s, const SafeTensor& weight, const std::function<const SafeTensor*(const std::string&)>& find,
                          const std::string& stem, const std::string& where) {
  if (weight.shape.size() != 2) throw Error(where + ": tensor '" + weight.name + "' should be F8_E4M3 [rows, columns]");
  RepackedLinear out;
  out.dtype = LOOM_DTYPE_F8_E4M3_B32;
  out.rows = weight.shape[0], out.columns = weight.shape[1];
  if (out.columns % LOOM_QK_F8_E4M3_B32 != 0)
    throw Error(where + ": '" + stem + "' has " + std::to_string(out.columns) + " columns, not a multiple of 32 (Loom's FP8 blocks)");
  int64_t scale_block_rows = out.rows, scale_block_columns = out.columns;  // per tensor
  if (s.fp8_per_channel) scale_block_rows = 1;
  if (s.fp8_block_rows > 0) scale_block_rows = s.fp8_block_rows, scale_block_columns = s.fp8_block_columns;
  if (scale_block_columns % LOOM_QK_F8_E4M3_B32 != 0)
    throw Error(where + ": FP8 scale blocks of " + std::to_string(scale_block_columns) + " columns split Loom's blocks of 32");
  const int64_t scale_rows = (out.rows + scale_block_rows - 1) / scale_block_rows;
  const int64_t scale_columns = (out.columns + scale_block_columns - 1) / scale_block_columns;
  const std::string scale_name = stem + (s.method == QuantScheme::Method::fp8 ? ".weight_scale_inv" : ".weight_scale");
  const SafeTensor& scale = need(find, scale_name, where);
  const bool shape_fits = element_count(scale.shape) == scale_rows * scale_columns && scale.shape.size() <= 2 &&
                          (scale.shape.size() < 2 || scale.shape[1] == scale_columns);
  if (!shape_fits)
    throw Error(where + ": tensor '" + scale.name + "' should hold " + std::to_string(scale_rows) + " x " + std::to_string(scale_columns) +
                " scales for '" + weight.name + "' (" + s.name() + ")");
  const int64_t blocks = out.columns / LOOM_QK_F8_E4M3_B32;
  out.bytes.resize(size_t(out.rows * blocks) * sizeof(loom_block_f8_e4m3_b32));
  for (int64_t o = 0; o < out.rows; o++) {
    for (int64_t b = 0; b < blocks; b++) {
      loom_block_f8_e4m3_b32 y;
      y.d = float_scale_at(scale, (o / scale_block_rows) * scale_columns + b * LOOM_QK_F8_E4M3_B32 / scale_block_columns, where);
      const uint8_t* codes = weight.data.data() + size_t(o * out.columns + b * LOOM_QK_F8_E4M3_B32);
      for (int j = 0; j < LOOM_QK_F8_E4M3_B32; j++) {
        if ((codes[j] & 0x7F) == 0x7F)
          throw Error(where + ": tensor '" + weight.name + "' holds a NaN code at row " + std::to_string(o) + ", column " +
                      std::to_string(b * LOOM_QK_F8_E4M3_B32 + j));
        y.qs[j] = codes[j];
      }
      std::memcpy(out.bytes.data() + size_t(o * blocks + b) * sizeof y, &y, sizeof y);
    }
  }
  return out;
}

bool bool_or(const json& q, const char* key, bool fallback, const std::string& where) {
  if (!q.contains(key) || q[key].is_null()) return fallback;
  if (!q[key].is_boolean()) throw Error(where + ": quantization_config." + key + " is not true or false");
  return q[key].get<bool>();
}

int64_t int_or(const json& q, const char* key, int64_t fallback, const std::string& where) {
  if (!q.contains(key) || q[key].is_null()) return fallback;
  if (!q[key].is_number_integer()) throw Error(where + ": quantization_config." + key + " is not an integer");
  return q[key].get<int64_t>();
}

std::string string_or(const json& q, const char* key, const std::string& fallback, const std::string& where) {
  if (!q.contains(key) || q[key].is_null()) return fallback;
  if (!q[key].is_string()) throw Error(where + ": quantization_config." + key + " is not a string");
  return q[key].get<std::string>();
}

void check_group_size(int64_t group_size, const std::string& where) {
  if (group_size != -1 && (group_size <= 0 || group_size % 32 != 0))
    throw Error(where + ": quantization_config group_size " + std::to_string(group_size) +
                " is not -1 or a multiple of 32 (a group must span whole blocks of 32)");
}

// compressed-tensors' float-quantized weights: FP8 E4M3 per tensor, per channel or in blocks.
QuantScheme compressed_fp8_scheme(QuantScheme s, const json& wq, const std::string& where, const std::string& w_where) {
  if (string_or(wq, "type", "", w_where) != "float" || int_or(wq, "num_bits", 0, w_where) != 8)
    throw Error(where + ": float-quantized weights other than 8-bit floats (FP8 E4M3) are not read");
  if (!bool_or(wq, "symmetric", true, w_where)) throw Error(where + ": float-quantized weights with zero points are not read");
  s.bits = 8;
  const std::string strategy = string_or(wq, "strategy", "", w_where);
  if (strategy == "channel") {
    s.fp8_per_channel = true;
  } else if (strategy == "block") {
    const json& block = wq.contains("block_structure") ? wq["block_structure"] : json();
    if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() || !block[1].is_number_integer() || block[0].get<int64_t>() <= 0 ||
        block[1].get<int64_t>() <= 0)
      throw Error(where + ": block_structure should be two positive integers [rows, columns]");
    s.fp8_block_rows = block[0].get<int64_t>(), s.fp8_block_columns = block[1].get<int64_t>();
  } else if (strategy != "tensor") {
    throw Error(where + ": float-quantized strategy '" + strategy + "': Loom reads tensor, channel and block");
  }
  return s;
}

// compressed-tensors: one scheme for the weights of every quantized layer.
QuantScheme compressed_scheme(const json& q, const std::string& where) {
  const std::string format = string_or(q, "format", "", where);
  QuantScheme s;
  if (format == "pack-quantized") s.method = QuantScheme::Method::compressed_packed;
  else if (format == "int-quantized") s.method = QuantScheme::Method::compressed_int8;
  else if (format == "float-quantized") s.method = QuantScheme::Method::compressed_fp8;
  else throw Error(where + ": compressed-tensors format '" + format + "': Loom reads pack-quantized, int-quantized and float-quantized");
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    throw Error(where + ": quantization_config.config_groups is missing");
  std::optional<json> weights;
  for (const auto& [name, group] : q["config_groups"].items()) {
    if (!group.is_object() || !group.contains("weights") || !group["weights"].is_object())
      throw Error(where + ": quantization_config.config_groups." + name + ".weights is missing");
    if (weights && *weights != group["weights"]) throw Error(where + ": config_groups quantize layers differently; Loom reads one weight scheme");
    weights = group["weights"];
  }
  const json& wq = *weights;
  const std::string w_where = where + " (config_groups weights)";
  if (s.method == QuantScheme::Method::compressed_fp8) return compressed_fp8_scheme(s, wq, where, w_where);
  if (string_or(wq, "type", "int", w_where) != "int") throw Error(where + ": compressed-tensors weights of type '" + wq.value("type", "") + "': Loom reads int");
  s.bits = int(int_or(wq, "num_bits", 0, w_where));
  s.symmetric = bool_or(wq, "symmetric", true, w_where);
  if (!s.symmetric) throw Error(where + ": compressed-tensors weights with zero points (symmetric: false) are not read yet");
  const std::string strategy = string_or(wq, "strategy", "", w_where);
  if (strategy == "channel") s.group_size = -1;
  else if (strategy == "group") s.group_size = int_or(wq, "group_size", 0, w_where);
  else throw Error(where + ": compressed-tensors strategy '" + strategy + "': Loom reads group and channel");
  if (s.method == QuantScheme::Method::compressed_int8 && s.bits != 8) throw Error(where + ": int-quantized weights of " + std::to_string(s.bits) + " bits");
  if (s.method == QuantScheme::Method::compressed_packed && s.bits != 4 && s.bits != 8)
    throw Error(where + ": pack-quantized weights of " + std::to_string(s.bits) + " bits: Loom reads 4 and 8");
  check_group_size(s.group_size, where);
  return s;
}

}  // namespace

std::string QuantScheme::name() const {
  const std::string group = group_size < 0 ? "per channel" : "groups of " + std::to_string(group_size);
  switch (method) {
    case Method::gptq: return "GPTQ " + std::to_string(bits) + "-bit, " + group;
    case Method::awq: return "AWQ 4-bit, " + group;
    case Method::compressed_packed: return "compressed-tensors pack-quantized " + std::to_string(bits) + "-bit, " + group;
    case Method::compressed_int8: return "compressed-tensors int-quantized 8-bit, " + group;
    case Method::mxfp4: return "MXFP4";
    case Method::fp8:
    case Method::compressed_fp8: {
      const std::string scales = fp8_per_channel    ? "per channel"
                                 : fp8_block_rows > 0 ? std::to_string(fp8_block_rows) + " x " + std::to_string(fp8_block_columns) + " blocks"
                                                      : "per tensor";
      return std::string(method == Method::fp8 ? "FP8" : "compressed-tensors float-quantized") + " E4M3, scales " + scales;
    }
  }
  return "?";
}

std::optional<QuantScheme> quant_scheme_of(const json& config, const std::filesystem::path& dir) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return std::nullopt;
  const std::string where = (dir / "config.json").string();
  const json& q = config["quantization_config"];
  if (!q.is_object()) throw Error(where + ": quantization_config is not an object");
  const std::string method = string_or(q, "quant_method", "", where);
  if (method == "compressed-tensors") return compressed_scheme(q, where);
  QuantScheme s;
  if (method == "mxfp4") {
    s.method = QuantScheme::Method::mxfp4;
    return s;
  }
  if (method == "fp8") {  // transformers' FineGrainedFP8 (DeepSeek's and Qwen's FP8 releases)
    s.method = QuantScheme::Method::fp8;
    s.bits = 8;
    if (string_or(q, "fmt", "e4m3", where) != "e4m3") throw Error(where + ": FP8 format '" + q.value("fmt", "") + "': Loom reads e4m3");
    if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
      const json& block = q["weight_block_size"];
      if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() || !block[1].is_number_integer() ||
          block[0].get<int64_t>() <= 0 || block[1].get<int64_t>() <= 0)
        throw Error(where + ": quantization_config.weight_block_size should be two positive integers [rows, columns]");
      s.fp8_block_rows = block[0].get<int64_t>(), s.fp8_block_columns = block[1].get<int64_t>();
    }
    return s;
  }
  s.bits = int(int_or(q, "bits", 0, where));
  s.group_size = int_or(q, "group_size", 128, where);
  if (method == "gptq") {
    s.method = QuantScheme::Method::gptq;
    if (s.bits != 4 && s.bits != 8) throw Error(where + ": GPTQ with " + std::to_string(s.bits) + " bits: Loom reads 4 and 8");
    s.symmetric = bool_or(q, "sym", true, where);
    const std::string format = string_or(q, "checkpoint_format", "gptq", where);
    if (format != "gptq" && format != "gptq_v2") throw Error(where + ": GPTQ checkpoint_format '" + format + "': Loom reads gptq and gptq_v2");
    s.gptq_zero_offset = format == "gptq";
  } else if (method == "awq") {
    s.method = QuantScheme::Method::awq;
    if (s.bits != 4) throw Error(where + ": AWQ with " + std::to_string(s.bits) + " bits: Loom reads 4");
    std::string version = string_or(q, "version", "gemm", where);
    for (char& c : version) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (version != "gemm") throw Error(where + ": AWQ version '" + version + "': Loom reads the GEMM packing");
    if (!bool_or(q, "zero_point", true, where)) throw Error(where + ": AWQ without zero points is not read");
    s.symmetric = false;
  } else {
    throw Error(where + ": quantization method '" + method +
                "': Loom reads gptq, awq, fp8, compressed-tensors (pack-quantized, int-quantized, float-quantized) and gpt-oss's mxfp4");
  }
  check_group_size(s.group_size, where);
  return s;
}

std::optional<RepackedLinear> repack_linear(const QuantScheme& scheme, const std::function<const SafeTensor*(const std::string&)>& find,
                                            const std::string& stem, const std::string& where, bool allow_q4_0) {
  switch (scheme.method) {
    case QuantScheme::Method::gptq:
      if (find(stem + ".qweight") == nullptr) return std::nullopt;
      return to_blocks(gptq_integers(scheme, find, stem, where), scheme.bits, stem, where, allow_q4_0);
    case QuantScheme::Method::awq:
      if (find(stem + ".qweight") == nullptr) return std::nullopt;
      return to_blocks(awq_integers(scheme, find, stem, where), scheme.bits, stem, where, allow_q4_0);
    case QuantScheme::Method::compressed_packed:
      if (find(stem + ".weight_packed") == nullptr) return std::nullopt;
      return to_blocks(compressed_integers(scheme, find, stem, where), scheme.bits, stem, where, allow_q4_0);
    case QuantScheme::Method::compressed_int8: {
      const SafeTensor* weight = find(stem + ".weight");
      if (weight == nullptr || weight->dtype != "I8") return std::nullopt;
      return to_blocks(compressed_integers(scheme, find, stem, where), scheme.bits, stem, where, allow_q4_0);
    }
    case QuantScheme::Method::fp8:
    case QuantScheme::Method::compressed_fp8: {
      const SafeTensor* weight = find(stem + ".weight");
      if (weight == nullptr || weight->dtype != "F8_E4M3") return std::nullopt;  // a layer left unquantized
      return fp8_blocks(scheme, *weight, find, stem, where);
    }
    case QuantScheme::Method::mxfp4: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace loom::hf
