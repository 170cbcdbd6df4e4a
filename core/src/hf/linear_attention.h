// Qwen 3.5's Gated DeltaNet layers as llama.cpp's converter rewrites them (conversion/qwen.py,
// _LinearAttentionVReorderBase and Qwen3NextModel.modify_tensors). The checkpoint groups value heads by
// key head ([K0: v0 .. v(r-1)], [K1: ...]); llama.cpp broadcasts key heads over value heads tiled
// ([K0 K1 ...] r times), so every tensor indexed by value head has its heads reordered: in_proj_qkv's
// value rows, in_proj_z's rows, in_proj_a/b's rows, dt_bias and A_log, conv1d's value channels, and
// out_proj's columns. A_log becomes A = -exp(A_log); conv1d [channels, 1, kernel] loses its 1.
// Qwen3-Next keeps the grouped order (llama.cpp's qwen3next reads it so) but fuses q, k, v and z.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "loom/dtype.h"

namespace loom::hf {

struct ValueHeads {
  int64_t n_k_heads = 0, n_v_heads = 0, k_head_dim = 0, v_head_dim = 0;
  bool grouped() const { return n_k_heads > 0 && n_v_heads > n_k_heads; }  // else nothing moves
};

// config.json's linear_num_key_heads, linear_num_value_heads, linear_key_head_dim and
// linear_value_head_dim (zeros when absent: a family without linear attention).
ValueHeads value_heads_of(const nlohmann::json& config);

// Rows [first_row, first_row + n_v_heads * head_rows) of a row-major tensor, value heads of head_rows
// rows each, from grouped to tiled order; the other rows stay.
std::vector<uint8_t> tile_value_head_rows(std::span<const uint8_t> data, int64_t rows, int64_t first_row, int64_t head_rows, const ValueHeads& heads);

// The same for columns: each row's n_v_heads * head_columns values of elem_bytes each.
std::vector<uint8_t> tile_value_head_columns(std::span<const uint8_t> data, int64_t rows, int64_t head_columns, size_t elem_bytes,
                                             const ValueHeads& heads);

// Qwen3-Next's in_proj_qkvz holds, per key head, its q, k, v and z rows (k_head_dim, k_head_dim and
// twice n_v / n_k * v_head_dim); the converter writes every head's q, then every k, then every v as
// attn_qkv (gate false), and the z rows as attn_gate (gate true). Rows move as bytes (blocks too).
std::vector<uint8_t> split_qkvz(std::span<const uint8_t> data, int64_t rows, const ValueHeads& heads, bool gate);

// A = -exp(A_log) as F32, computed in the precision the converter computes it: float32, or F16 for an
// F16 checkpoint (torch keeps F16 tensors F16 and widens the rest).
std::vector<uint8_t> negative_exp_f32(loom_dtype stored, std::span<const uint8_t> data, int64_t n);

}  // namespace loom::hf
