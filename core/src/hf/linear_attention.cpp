#include "hf/linear_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "gguf/block_quantize.h"

namespace loom::hf {

ValueHeads value_heads_of(const nlohmann::json& config) {
  auto number = [&](const char* key) { return config.contains(key) && config[key].is_number_integer() ? config[key].get<int64_t>() : 0; };
  return {number("linear_num_key_heads"), number("linear_num_value_heads"), number("linear_key_head_dim"), number("linear_value_head_dim")};
}

namespace {

// The grouped position of tiled value head h: head j of key head k sits at k * r + j grouped, at
// j * n_k + k tiled.
int64_t grouped_head(int64_t tiled, const ValueHeads& heads) {
  const int64_t per_key = heads.n_v_heads / heads.n_k_heads;
  return (tiled % heads.n_k_heads) * per_key + tiled / heads.n_k_heads;
}

}  // namespace

std::vector<uint8_t> tile_value_head_rows(std::span<const uint8_t> data, int64_t rows, int64_t first_row, int64_t head_rows, const ValueHeads& heads) {
  std::vector<uint8_t> out(data.begin(), data.end());
  if (!heads.grouped()) return out;
  if (heads.n_v_heads % heads.n_k_heads != 0 || rows <= 0 || first_row + heads.n_v_heads * head_rows > rows)
    throw Error("linear attention: " + std::to_string(heads.n_v_heads) + " value heads of " + std::to_string(head_rows) + " rows do not fit " +
                std::to_string(rows) + " rows after row " + std::to_string(first_row) + " (or do not divide among the key heads)");
  const size_t row_bytes = data.size() / size_t(rows), head_bytes = row_bytes * size_t(head_rows);
  for (int64_t h = 0; h < heads.n_v_heads; h++)
    std::memcpy(out.data() + size_t(first_row) * row_bytes + size_t(h) * head_bytes,
                data.data() + size_t(first_row) * row_bytes + size_t(grouped_head(h, heads)) * head_bytes, head_bytes);
  return out;
}

std::vector<uint8_t> tile_value_head_columns(std::span<const uint8_t> data, int64_t rows, int64_t head_columns, size_t elem_bytes,
                                             const ValueHeads& heads) {
  std::vector<uint8_t> out(data.begin(), data.end());
  if (!heads.grouped()) return out;
  const size_t head_bytes = size_t(head_columns) * elem_bytes, row_bytes = head_bytes * size_t(heads.n_v_heads);
  if (heads.n_v_heads % heads.n_k_heads != 0 || rows <= 0 || row_bytes * size_t(rows) != data.size())
    throw Error("linear attention: rows of " + std::to_string(data.size() / size_t(std::max<int64_t>(rows, 1))) + " bytes are not " +
                std::to_string(heads.n_v_heads) + " value heads of " + std::to_string(head_columns) + " columns");
  for (int64_t r = 0; r < rows; r++)
    for (int64_t h = 0; h < heads.n_v_heads; h++)
      std::memcpy(out.data() + size_t(r) * row_bytes + size_t(h) * head_bytes, data.data() + size_t(r) * row_bytes + size_t(grouped_head(h, heads)) * head_bytes,
                  head_bytes);
  return out;
}

std::vector<uint8_t> split_qkvz(std::span<const uint8_t> data, int64_t rows, const ValueHeads& heads, bool gate) {
  const int64_t value_rows = heads.n_k_heads > 0 ? heads.n_v_heads / heads.n_k_heads * heads.v_head_dim : 0;
  const int64_t part_rows[4] = {heads.k_head_dim, heads.k_head_dim, value_rows, value_rows};  // q, k, v, z
  const int64_t per_head = 2 * heads.k_head_dim + 2 * value_rows;
  if (heads.n_k_heads <= 0 || per_head <= 0 || rows != per_head * heads.n_k_heads)
    throw Error("linear attention: in_proj_qkvz has " + std::to_string(rows) + " rows, not " + std::to_string(heads.n_k_heads) +
                " key heads of q, k, v and z rows (" + std::to_string(per_head) + " each)");
  const size_t row_bytes = data.size() / size_t(rows);
  std::vector<uint8_t> out;
  out.reserve(data.size());
  const int first_part = gate ? 3 : 0, end_part = gate ? 4 : 3;
  for (int part = first_part; part < end_part; part++) {
    int64_t offset = 0;
    for (int q = 0; q < part; q++) offset += part_rows[q];
    for (int64_t k = 0; k < heads.n_k_heads; k++) {
      const uint8_t* from = data.data() + size_t(k * per_head + offset) * row_bytes;
      out.insert(out.end(), from, from + size_t(part_rows[part]) * row_bytes);
    }
  }
  return out;
}

std::vector<uint8_t> negative_exp_f32(loom_dtype stored, std::span<const uint8_t> data, int64_t n) {
  const std::vector<float> values = dequantize_rows(stored, data, n);
  std::vector<uint8_t> out(values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); i++) {
    float a = -float(std::exp(double(values[i])));  // exp correctly rounded to float32
    if (stored == LOOM_DTYPE_F16) a = f16_to_f32(f32_to_f16(a));
    std::memcpy(out.data() + i * sizeof(float), &a, sizeof(float));
  }
  return out;
}

}  // namespace loom::hf
