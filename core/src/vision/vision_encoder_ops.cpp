// VisionEncoder's op list: the ViT and each projector type as ABI ops over scratch rows (see
// vision_encoder.h for the graphs), built for one patch grid at a time.
#include <algorithm>
#include <cmath>

#include "vision/vision_encoder.h"

namespace loom::vision {

namespace {

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// A view of `t`'s buffer at byte `offset` with shape [ne0, ne1, ne2] and the given row strides: a
// column range of each row, or every k-th row.
loom_tensor strided(const loom_tensor& t, uint64_t offset, int64_t ne0, int64_t ne1, uint64_t nb1, int64_t ne2, uint64_t nb2) {
  loom_tensor v = t;
  v.offset = offset;
  v.ne[0] = ne0, v.ne[1] = ne1, v.ne[2] = ne2, v.ne[3] = 1;
  v.nb[1] = nb1, v.nb[2] = nb2, v.nb[3] = nb2 * uint64_t(ne2);
  return v;
}

// Qwen2.5-VL's windows over a grid of cx x cy merged cells (mtmd's window_idx): the cells regrouped
// window by window (windows row-major, cells row-major within each), where each cell goes, which cell
// comes from where, and each window's range of patch rows (4 per cell).
struct QwenWindows {
  std::vector<int32_t> index, inverse, ranges;  // ranges: [first row, rows] per window
};
QwenWindows qwen_windows(int64_t cx, int64_t cy, int64_t window) {
  QwenWindows w;
  w.index.resize(size_t(cx * cy));
  w.inverse.resize(size_t(cx * cy));
  int32_t next = 0;
  for (int64_t y = 0; y < cy; y += window)
    for (int64_t x = 0; x < cx; x += window) {
      const int32_t first = next;
      for (int64_t dy = 0; dy < std::min(window, cy - y); dy++)
        for (int64_t dx = 0; dx < std::min(window, cx - x); dx++) {
          const auto cell = size_t((y + dy) * cx + x + dx);
          w.index[cell] = next;
          w.inverse[size_t(next)] = int32_t(cell);
          next++;
        }
      w.ranges.insert(w.ranges.end(), {4 * first, 4 * (next - first)});
    }
  return w;
}

}  // namespace

void VisionEncoder::upload_positions(int64_t gx, int64_t gy) {
  const MmprojInfo& m = info_;
  if (m.rope_theta <= 0.0f) return;
  std::vector<int32_t> positions;
  const bool windowed = m.projector == ProjectorType::qwen25vl;
  if (windowed || m.projector == ProjectorType::qwen3vl) {
    // Each patch's (row, column, row, column), at its place after the blocks are grouped by window
    // (qwen3vl: one window, the blocks in grid order).
    const int64_t n = gx * gy, cx = gx / 2, cy = gy / 2;
    const QwenWindows w = qwen_windows(cx, cy, windowed ? m.window_cells : std::max(cx, cy));
    positions.resize(size_t(4 * n));
    for (int64_t cell = 0; cell < cx * cy; cell++)
      for (int64_t j = 0; j < 4; j++) {
        const auto at = size_t(4 * int64_t(w.index[size_t(cell)]) + j);
        const auto row = int32_t(cell / cx * 2 + j / 2), column = int32_t(cell % cx * 2 + j % 2);
        positions[at] = row, positions[size_t(n) + at] = column, positions[size_t(2 * n) + at] = row, positions[size_t(3 * n) + at] = column;
      }
    std::vector<int32_t> tables(w.index);
    tables.insert(tables.end(), w.inverse.begin(), w.inverse.end());
    tables.insert(tables.end(), w.ranges.begin(), w.ranges.end());
    if (windowed) backend_.upload(compute_, at_.windows, tables.data(), tables.size() * 4);
    // The pair frequencies of both halves of the rotated quarter-head sections restart at theta^0
    // (ggml's vision rope): the second section's are divided by theta^-1, i.e. multiplied by theta.
    std::vector<float> factors(size_t(m.head_dim / 2), 1.0f);
    for (size_t i = factors.size() / 2; i < factors.size(); i++) factors[i] = 1.0f / m.rope_theta;
    backend_.upload(compute_, at_.rope_factors, factors.data(), factors.size() * 4);
  } else {  // the rows' and then the columns' positions of the 2-D RoPE
    positions.resize(size_t(2 * gx * gy));
    for (int64_t i = 0; i < gx * gy; i++) {
      positions[size_t(i)] = int32_t(i / gx);
      positions[size_t(gx * gy + i)] = int32_t(i % gx);
    }
  }
  backend_.upload(compute_, at_.positions, positions.data(), positions.size() * 4);
  backend_.synchronize();  // `positions` goes out of scope
}

// ggml's bilinear interpolation with aligned corners (clip.cpp's resize_position_embeddings), on the
// host: the table is small, and a grid's resize is reused until the grid changes. Each patch of the
// gx x gy grid, row-major, takes the table's value at (x (side - 1) / (gx - 1), y (side - 1) / (gy - 1)).
void VisionEncoder::upload_resized_positions(int64_t gx, int64_t gy) {
  if (gx == pos_gx_ && gy == pos_gy_) return;
  const int64_t c = info_.dim, side = info_.pos_side;
  std::vector<float> resized(size_t(c * gx * gy));
  // ggml's scale factors in float: out / in, or (out - 1) / (in - 1) with aligned corners where both exceed 1.
  const float sf0 = gx > 1 && side > 1 ? float(gx - 1) / float(side - 1) : float(gx) / float(side);
  const float sf1 = gy > 1 && side > 1 ? float(gy - 1) / float(side - 1) : float(gy) / float(side);
  auto axis = [&](int64_t i, float sf, int64_t& lo, int64_t& hi) {
    const float at = float(i) / sf;
    lo = std::clamp<int64_t>(int64_t(std::floor(at)), 0, side - 1);
    hi = std::clamp<int64_t>(lo + 1, 0, side - 1);
    return std::clamp(at - float(lo), 0.0f, 1.0f);
  };
  for (int64_t y = 0; y < gy; y++) {
    int64_t y0, y1;
    const float dy = axis(y, sf1, y0, y1);
    for (int64_t x = 0; x < gx; x++) {
      int64_t x0, x1;
      const float dx = axis(x, sf0, x0, x1);
      const float* a = &pos_table_[size_t((y0 * side + x0) * c)];
      const float* b = &pos_table_[size_t((y0 * side + x1) * c)];
      const float* cc = &pos_table_[size_t((y1 * side + x0) * c)];
      const float* d = &pos_table_[size_t((y1 * side + x1) * c)];
      float* out = &resized[size_t((y * gx + x) * c)];
      for (int64_t ch = 0; ch < c; ch++)
        out[ch] = a[ch] * (1 - dx) * (1 - dy) + b[ch] * dx * (1 - dy) + cc[ch] * (1 - dx) * dy + d[ch] * dx * dy;
    }
  }
  backend_.upload(compute_, at_.pos_resized, resized.data(), resized.size() * 4);
  backend_.synchronize();  // `resized` goes out of scope
  pos_gx_ = gx, pos_gy_ = gy;
}

void VisionEncoder::allocate_scratch() {
  const MmprojInfo& m = info_;
  const int64_t p = m.patch_size;
  if (m.dynamic()) {
    max_patches_ = int64_t(m.preprocess.max_pixels / uint64_t(p * p));
    max_cells_ = max_patches_ / (int64_t(m.merge) * m.merge);
    max_rows_ = m.img_break ? 2 * max_cells_ : max_cells_;  // a grid one cell wide has a break per cell
  } else {
    max_patches_ = m.n_patches();
    max_cells_ = max_rows_ = m.n_image_tokens();
  }
  const auto c = uint64_t(m.dim), n = uint64_t(max_patches_ + (m.class_embedding ? 1 : 0)), cells = uint64_t(max_cells_);
  const uint64_t pixels = m.dynamic() ? m.preprocess.max_pixels : uint64_t(m.image_size) * m.image_size;
  const auto widest = uint64_t(std::max<int64_t>({m.dim, m.ff_dim, p * p * 3}));
  uint64_t offset = 0;
  auto reserve = [&](uint64_t floats) {
    const uint64_t at = offset;
    offset = align_up(offset + floats * 4, 256);
    return at;
  };
  at_.image = reserve(3 * pixels);
  const bool qwen = m.projector == ProjectorType::qwen25vl || m.projector == ProjectorType::qwen3vl;
  at_.positions = reserve(m.rope_theta > 0.0f ? (qwen ? 4 : 2) * n : 0);
  at_.windows = reserve(m.projector == ProjectorType::qwen25vl ? 4 * cells : 0);  // window_idx, inv_window_idx, and the windows' row ranges
  at_.rope_factors = reserve(qwen ? uint64_t(m.head_dim / 2) : 0);
  at_.pos_resized = reserve(m.pos_side > 0 ? c * n : 0);
  pos_gx_ = pos_gy_ = 0;
  at_.x = reserve(c * n), at_.h = reserve(c * n), at_.q = reserve(c * n), at_.k = reserve(c * n), at_.v = reserve(c * n);
  at_.a = reserve(c * n);
  at_.wide = reserve(widest * n);
  at_.wide2 = reserve(m.ffn_gated ? uint64_t(m.ff_dim) * n : 0);
  at_.merged = reserve(m.patch_merger || m.projector == ProjectorType::idefics3 || qwen ? c * n : 0);
  at_.pool = reserve(c * cells);
  at_.hidden = reserve(uint64_t(m.proj_hidden) * cells);
  at_.pre_out = reserve(m.img_break || qwen ? uint64_t(m.n_embd_text) * cells : 0);
  at_.out = reserve(uint64_t(m.row_width()) * uint64_t(max_rows_));
  compute_ = backend_.alloc(offset, LOOM_BUFFER_USAGE_COMPUTE);
}

void VisionEncoder::build_ops(int64_t gx, int64_t gy) {
  const MmprojInfo& m = info_;
  const int64_t c = m.dim, p = m.patch_size, n_patches = gx * gy, n = n_patches + (m.class_embedding ? 1 : 0);
  const int64_t d = m.head_dim, k = m.merge, cx = gx / k, cy = gy / k, cells = cx * cy;
  norm_ = {sizeof(loom_norm_params), m.eps};
  attn_ = {sizeof(loom_encoder_attention_params), m.gemma4_blocks ? 1.0f : 1.0f / std::sqrt(float(d)), 0, 0};
  pooled_scale_ = {sizeof(loom_scale_params), std::sqrt(float(c))};
  patch_ = {sizeof(loom_patch_params), m.patch_size};
  pool_ = {sizeof(loom_pool_params), m.merge};
  const loom_activation act = m.silu ? LOOM_ACTIVATION_SILU : m.gelu_quick ? LOOM_ACTIVATION_GELU_QUICK : LOOM_ACTIVATION_GELU_TANH;
  ffn_act_ = {sizeof(loom_glu_params), act};
  gelu_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_GELU_TANH};
  // 2-D RoPE as clip.cpp's build_rope_2d: the first half of a head rotated by the patch's row with the
  // even frequencies, the second half by its column with the odd ones (a frequency scale of theta^(-2/d)).
  rope_rows_ = {sizeof(loom_rope_params), LOOM_ROPE_NORMAL, uint32_t(d / 2), m.rope_theta, 1.0f, 0.0f, {0.0f, 0.0f}};
  rope_cols_ = rope_rows_;
  rope_cols_.freq_scale = std::pow(m.rope_theta, -2.0f / float(d));
  if (m.gemma4_blocks) {
    // gemma4v: each half its own NEOX rotation over d / 2 dims (the first by column, the second by row).
    rope_rows_ = {sizeof(loom_rope_params), LOOM_ROPE_NEOX, uint32_t(d / 2), m.rope_theta, 1.0f, 0.0f, {0.0f, 0.0f}};
    rope_cols_ = rope_rows_;
  }
  const bool qwen = m.projector == ProjectorType::qwen25vl || m.projector == ProjectorType::qwen3vl;
  const bool windowed = m.projector == ProjectorType::qwen25vl;
  if (qwen) {
    // ggml's vision M-RoPE over pairs (i, i + d/2): the first d/4 pairs by the patch's row at theta^(-4i/d),
    // the next d/4 by its column, their frequencies restarting (the factors): NEOX over d at theta².
    const int32_t quarter = int32_t(d / 4);
    rope_rows_ = {sizeof(loom_rope_params), LOOM_ROPE_NEOX | LOOM_ROPE_MROPE | LOOM_ROPE_FREQ_FACTORS, uint32_t(d),
                  m.rope_theta * m.rope_theta, 1.0f, 0.0f, {0.0f, 0.0f}, {quarter, quarter, 0, 0}};
  }

  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) { return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2); };
  ops_.clear();
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs, const void* params = nullptr) {
    ops_.push_back(make_op(type, dst, srcs, params));
  };
  auto add_bias = [&](const loom_tensor& x, const loom_tensor& bias) {
    if (bias.buffer != nullptr) op(LOOM_OP_ADD, x, {x, bias});
  };
  auto linear = [&](const loom_tensor& dst, const loom_tensor& w, const loom_tensor& bias, const loom_tensor& x,
                    const LinearClamp& bounds = {}) {
    // A bounded input is clamped in place: every input here is scratch the linear's callers no longer need.
    if (bounds.input.struct_size != 0) op(LOOM_OP_CLAMP, x, {x}, &bounds.input);
    op(LOOM_OP_MATMUL, dst, {w, x});
    add_bias(dst, bias);
    if (bounds.output.struct_size != 0) op(LOOM_OP_CLAMP, dst, {dst}, &bounds.output);
  };
  auto norm = [&](const loom_tensor& dst, const loom_tensor& x, const loom_tensor& w, const loom_tensor& b) {
    if (!m.rms_norm) {
      op(LOOM_OP_LAYER_NORM, dst, {x, w, b}, &norm_);
      return;
    }
    op(LOOM_OP_RMS_NORM, dst, {x, w}, &norm_);
    add_bias(dst, b);
  };
  const loom_tensor pos_rows = tensor_view(compute_, at_.positions, LOOM_DTYPE_I32, n);
  const loom_tensor pos_cols = tensor_view(compute_, at_.positions + uint64_t(n) * 4, LOOM_DTYPE_I32, n);
  auto rope_2d = [&](const loom_tensor& t) {
    const loom_tensor heads = reshape(t, d, m.n_heads, n);
    if (qwen) {
      op(LOOM_OP_ROPE, heads, {heads, tensor_view(compute_, at_.positions, LOOM_DTYPE_I32, n, 4),
                               f32(at_.rope_factors, d / 2)}, &rope_rows_);
      return;
    }
    const loom_tensor first = m.gemma4_blocks ? strided(heads, heads.offset, d / 2, m.n_heads, heads.nb[1], n, heads.nb[2]) : heads;
    op(LOOM_OP_ROPE, first, {first, m.gemma4_blocks ? pos_cols : pos_rows}, &rope_rows_);
    const loom_tensor second = strided(heads, heads.offset + uint64_t(d / 2) * 4, d / 2, m.n_heads, heads.nb[1], n, heads.nb[2]);
    op(LOOM_OP_ROPE, second, {second, m.gemma4_blocks ? pos_rows : pos_cols}, &rope_cols_);
  };
  auto head_norm = [&](const loom_tensor& t, const loom_tensor& w) {  // an RMS norm per head (w: [d] or none)
    const loom_tensor heads = reshape(t, d, m.n_heads * n);
    op(LOOM_OP_RMS_NORM, heads, {heads, w}, &norm_);
  };

  const loom_tensor x = f32(at_.x, c, n), h = f32(at_.h, c, n), q = f32(at_.q, c, n), kk = f32(at_.k, c, n), v = f32(at_.v, c, n);
  // Each merge x merge block of patch rows of `src` side by side, one row per block (block rows in
  // (ky, kx) order), into the merged scratch: pixtral's unfold and idefics3's pixel shuffle.
  auto merge_blocks = [&](uint64_t src, uint64_t dst) {
    const uint64_t row = uint64_t(c) * 4;
    for (int64_t ky = 0; ky < k; ky++)
      for (int64_t kx = 0; kx < k; kx++) {
        const loom_tensor from = strided(h, src + uint64_t(ky * gx + kx) * row, c, cx, uint64_t(k) * row, cy, uint64_t(k * gx) * row);
        const loom_tensor to = strided(h, dst + uint64_t(ky * k + kx) * row, c, cx, uint64_t(k * k) * row, cy, uint64_t(cx * k * k) * row);
        op(LOOM_OP_COPY, to, {from});
      }
    return f32(dst, c * k * k, cells);
  };
  const loom_tensor a = f32(at_.a, c, n), patches = f32(at_.wide, p * p * 3, n_patches);
  const loom_tensor ffn = f32(at_.wide, m.ff_dim, n), ffn_up = f32(at_.wide2, m.ff_dim, n);
  const QwenWindows windows = windowed ? qwen_windows(cx, cy, m.window_cells) : QwenWindows{};
  const auto i32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1) { return tensor_view(compute_, off, LOOM_DTYPE_I32, ne0, ne1); };
  const loom_tensor window_index = i32(at_.windows, cells), window_inverse = i32(at_.windows + uint64_t(cells) * 4, cells);
  const loom_tensor window_ranges = i32(at_.windows + uint64_t(2 * cells) * 4, 2, int64_t(windows.ranges.size() / 2));
  op(LOOM_OP_PATCHES, patches, {f32(at_.image, gx * p, gy * p, 3)}, &patch_);
  if (windowed) {
    // Each 2 x 2 block's patch rows together (block by block), and the blocks grouped window by window.
    linear(h, patch_w_, patch_b_, patches);
    op(LOOM_OP_GET_ROWS, f32(at_.x, 4 * c, cells), {merge_blocks(at_.h, at_.merged), window_inverse});
  } else if (qwen) {  // qwen3vl: the resized position table added in grid order, then the blocks together
    linear(h, patch_w_, patch_b_, patches);
    op(LOOM_OP_ADD, h, {h, f32(at_.pos_resized, c, n)});
    merge_blocks(at_.h, at_.x);
  } else {
    linear(f32(at_.x, c, n_patches), patch_w_, patch_b_, patches);
  }
  if (class_.buffer != nullptr) op(LOOM_OP_COPY, f32(at_.x + uint64_t(c * n_patches) * 4, c), {class_});
  if (m.pos_table > 0) {  // learned positions: the column's row of the first table, the row's of the second
    const loom_tensor by_col = row_range(pos_, 0, m.pos_table), by_row = row_range(pos_, m.pos_table, m.pos_table);
    op(LOOM_OP_GET_ROWS, h, {by_col, pos_cols});
    op(LOOM_OP_ADD, x, {x, h});
    op(LOOM_OP_GET_ROWS, h, {by_row, pos_rows});
    op(LOOM_OP_ADD, x, {x, h});
  } else if (pos_.buffer != nullptr) {
    op(LOOM_OP_ADD, x, {x, pos_});
  }
  if (pre_ln_w_.buffer != nullptr || pre_ln_b_.buffer != nullptr) norm(x, x, pre_ln_w_, pre_ln_b_);
  for (size_t il = 0; il < layers_.size(); il++) {
    const LayerWeights& l = layers_[il];
    norm(h, x, l.ln1_w, l.ln1_b);
    if (l.clamp_q.input.struct_size != 0 || l.clamp_k.input.struct_size != 0 || l.clamp_v.input.struct_size != 0) {
      // Each projection clamps its own copy of the normed input (the bounds differ): k's in the
      // attention output's scratch, v's in the FFN's, both free until later in the layer.
      const loom_tensor for_v = f32(at_.wide, c, n);
      op(LOOM_OP_COPY, a, {h});
      op(LOOM_OP_COPY, for_v, {h});
      linear(q, l.wq, l.bq, h, l.clamp_q);
      linear(kk, l.wk, l.bk, a, l.clamp_k);
      linear(v, l.wv, l.bv, for_v, l.clamp_v);
    } else {
      linear(q, l.wq, l.bq, h);
      linear(kk, l.wk, l.bk, h);
      linear(v, l.wv, l.bv, h);
    }
    if (m.gemma4_blocks) {
      head_norm(q, l.q_norm);
      head_norm(kk, l.k_norm);
    }
    if (m.rope_theta > 0.0f) {
      rope_2d(q);
      rope_2d(kk);
    }
    if (m.gemma4_blocks) head_norm(v, no_tensor());
    auto heads = [&](const loom_tensor& t) { return reshape(t, d, m.n_heads, n); };
    if (windowed && (int64_t(il) + 1) % m.window_pattern != 0) {  // within each window
      op(LOOM_OP_ATTENTION, heads(a), {heads(q), heads(kk), heads(v), window_ranges}, &attn_);
    } else {
      op(LOOM_OP_ATTENTION, heads(a), {heads(q), heads(kk), heads(v)}, &attn_);
    }
    linear(h, l.wo, l.bo, a, l.clamp_o);
    if (m.gemma4_blocks) op(LOOM_OP_RMS_NORM, h, {h, l.attn_post_norm}, &norm_);
    op(LOOM_OP_ADD, x, {x, h});
    norm(h, x, l.ln2_w, l.ln2_b);
    if (m.ffn_gated) {
      if (l.clamp_gate.input.struct_size != 0 || l.clamp_up.input.struct_size != 0) {
        op(LOOM_OP_COPY, a, {h});
        linear(ffn, l.gate, l.gate_b, h, l.clamp_gate);
        linear(ffn_up, l.up, l.up_b, a, l.clamp_up);
      } else {
        linear(ffn, l.gate, l.gate_b, h);
        linear(ffn_up, l.up, l.up_b, h);
      }
      op(LOOM_OP_GLU, ffn, {ffn, ffn_up}, &ffn_act_);
    } else {
      linear(ffn, l.up, l.up_b, h, l.clamp_up);
      op(LOOM_OP_UNARY, ffn, {ffn}, &ffn_act_);
    }
    linear(h, l.down, l.down_b, ffn, l.clamp_down);
    if (m.gemma4_blocks) op(LOOM_OP_RMS_NORM, h, {h, l.ffn_post_norm}, &norm_);
    op(LOOM_OP_ADD, x, {x, h});
    if (l.out_scale.struct_size != 0) op(LOOM_OP_SCALE, x, {x}, &l.out_scale);
    const auto deep = std::find(m.deepstack_layers.begin(), m.deepstack_layers.end(), int64_t(il));
    if (deep != m.deepstack_layers.end()) {  // qwen3vl: this layer's blocks through its merger, into their part of each row
      const auto part = deep - m.deepstack_layers.begin();
      const DeepstackWeights& ds = deepstack_[size_t(part)];
      const loom_tensor blocks = f32(at_.h, 4 * c, cells), hidden = f32(at_.hidden, m.proj_hidden, cells);
      const loom_tensor projected = f32(at_.pre_out, m.n_embd_text, cells);
      op(LOOM_OP_LAYER_NORM, blocks, {f32(at_.x, 4 * c, cells), ds.norm_w, ds.norm_b}, &norm_);
      linear(hidden, ds.fc1, ds.fc1_b, blocks);
      op(LOOM_OP_UNARY, hidden, {hidden}, &gelu_);
      linear(projected, ds.fc2, ds.fc2_b, hidden);
      const uint64_t row = uint64_t(m.row_width()) * 4;
      op(LOOM_OP_COPY, strided(projected, at_.out + uint64_t((part + 1) * m.n_embd_text) * 4, m.n_embd_text, cells, row, 1, row * uint64_t(cells)), {projected});
    }
  }
  if (post_ln_w_.buffer != nullptr || post_ln_b_.buffer != nullptr) norm(x, x, post_ln_w_, post_ln_b_);

  const loom_tensor out = f32(at_.out, m.n_embd_text, cells);
  switch (m.projector) {
    case ProjectorType::gemma3: {
      // The patch grid (row-major, x fastest) pooled merge x merge, then normalised and projected.
      const loom_tensor pooled = f32(at_.pool, c, cells);
      op(LOOM_OP_POOL_2D, f32(at_.pool, c, cx, cy), {reshape(x, c, gx, gy)}, &pool_);
      op(LOOM_OP_RMS_NORM, pooled, {pooled, soft_norm_}, &norm_);
      op(LOOM_OP_MATMUL, out, {proj_, pooled});
      break;
    }
    case ProjectorType::mlp: {
      // clip.cpp takes rows 1..n_patches: with a CLS row (placed last) that drops the first patch and
      // keeps the CLS row. Loom takes the same rows, so its images read as mtmd's do.
      const int64_t first = m.class_embedding ? 1 : 0;
      const loom_tensor selected = f32(at_.x + uint64_t(c * first) * 4, c, cells), hidden = f32(at_.hidden, m.proj_hidden, cells);
      linear(hidden, mm0_w_, mm0_b_, selected);
      op(LOOM_OP_UNARY, hidden, {hidden}, &gelu_);
      linear(out, mm2_w_, mm2_b_, hidden);
      break;
    }
    case ProjectorType::pixtral: {
      loom_tensor merged = x;
      if (m.patch_merger) {
        // Each merge x merge block of patches becomes one row: the block's patch rows side by side
        // (the merger's input was reordered at load to take them so, as unfold's (channel, ky, kx)).
        op(LOOM_OP_RMS_NORM, h, {x, merger_norm_}, &norm_);
        const loom_tensor blocks = merge_blocks(at_.h, at_.merged);
        merged = f32(at_.a, c, cells);
        op(LOOM_OP_MATMUL, merged, {merger_, blocks});
      }
      const loom_tensor hidden = f32(at_.hidden, m.proj_hidden, cells);
      const loom_tensor projected = m.img_break ? f32(at_.pre_out, m.n_embd_text, cells) : out;
      linear(hidden, mm0_w_, mm0_b_, merged);
      op(LOOM_OP_UNARY, hidden, {hidden}, &gelu_);
      linear(projected, mm2_w_, mm2_b_, hidden);
      if (m.img_break) {
        // Each grid row's cells, then an [IMG_BREAK] row (none after the last grid row).
        const uint64_t row = uint64_t(m.n_embd_text) * 4;
        op(LOOM_OP_COPY, strided(out, at_.out, m.n_embd_text, cx, row, cy, uint64_t(cx + 1) * row), {reshape(projected, m.n_embd_text, cx, cy)});
        for (int64_t y = 0; y + 1 < cy; y++) op(LOOM_OP_COPY, f32(at_.out + uint64_t(y * (cx + 1) + cx) * row, m.n_embd_text), {img_break_});
      }
      break;
    }
    case ProjectorType::idefics3:
      // Pixel shuffle: transformers' Idefics3 order is clip.cpp's, the block's rows (ky, kx) side by side.
      op(LOOM_OP_MATMUL, out, {fc_, merge_blocks(at_.x, at_.merged)});
      break;
    case ProjectorType::qwen25vl: {
      // The merger: each block's 4 normed rows as one, Linear, GELU, Linear; then the cells in grid order.
      const loom_tensor hidden = f32(at_.hidden, m.proj_hidden, cells), projected = f32(at_.pre_out, m.n_embd_text, cells);
      linear(hidden, mm0_w_, mm0_b_, f32(at_.x, 4 * c, cells));
      op(LOOM_OP_UNARY, hidden, {hidden}, &gelu_);
      linear(projected, mm2_w_, mm2_b_, hidden);
      op(LOOM_OP_GET_ROWS, out, {projected, window_index});
      break;
    }
    case ProjectorType::qwen3vl: {
      // The merger as qwen25vl's (the blocks already in grid order), into the first part of each row.
      const loom_tensor hidden = f32(at_.hidden, m.proj_hidden, cells), projected = f32(at_.pre_out, m.n_embd_text, cells);
      linear(hidden, mm0_w_, mm0_b_, f32(at_.x, 4 * c, cells));
      op(LOOM_OP_UNARY, hidden, {hidden}, &gelu_);
      linear(projected, mm2_w_, mm2_b_, hidden);
      const uint64_t row = uint64_t(m.row_width()) * 4;
      op(LOOM_OP_COPY, strided(projected, at_.out, m.n_embd_text, cells, row, 1, row * uint64_t(cells)), {projected});
      break;
    }
    case ProjectorType::gemma4v: {
      // Gemma4VisionPooler, then the multimodal embedder: pooled, scaled, standardised, normed, projected.
      const loom_tensor pooled = f32(at_.pool, c, cells);
      op(LOOM_OP_POOL_2D, f32(at_.pool, c, cx, cy), {reshape(x, c, gx, gy)}, &pool_);
      op(LOOM_OP_SCALE, pooled, {pooled}, &pooled_scale_);
      if (std_bias_.buffer != nullptr) {
        op(LOOM_OP_ADD, pooled, {pooled, std_bias_});
        op(LOOM_OP_MUL, pooled, {pooled, std_scale_});
      }
      op(LOOM_OP_RMS_NORM, pooled, {pooled, no_tensor()}, &norm_);
      linear(out, proj_, no_tensor(), pooled, proj_clamp_);
      break;
    }
  }
  ops_gx_ = gx;
  ops_gy_ = gy;
}

}  // namespace loom::vision
