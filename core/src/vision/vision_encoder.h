// VisionEncoder — a vision projector (mmproj GGUF) on a backend: an image in, the text model's
// embedding rows out. The encoder is a list of ABI ops (PATCHES, MATMUL, LAYER_NORM, ATTENTION,
// UNARY GELU, POOL_2D, RMS_NORM, ...) like the text model's forward, so it runs on any backend that
// implements the encoder ops (ABI 1.9).
//
//   gemma3 (SigLIP):  x = patches(image)·Wpatch + b + pos                     // [dim, n_patches]
//                     per layer: x += attn(ln1(x)) (q, k, v, out with biases, all patches see all)
//                                x += down(gelu(up(ln2(x))))
//                     x = post_ln(x); x = avg_pool(x as a grid, merge x merge)  // [dim, n_tokens]
//                     rows = rms_norm(x) * soft_emb_norm · Wproj               // [n_embd_text, n_tokens]
//   mlp (CLIP, LLaVA 1.5): x = patches(image)·Wpatch + b, then the CLS row (after the patches, as
//                     clip.cpp lays it out), + pos; pre_ln; the layers but the last (quick GELU);
//                     rows = the n_patches rows after the first through Linear, GELU, Linear
//   pixtral (Pixtral, Mistral Small 3.x): any size (the grid gx x gy follows the image); RMS norms;
//                     2-D RoPE on q and k (row, then column); SiLU-gated FFN; then, with a patch merger,
//                     rms_norm and each merge x merge block of patches concatenated and projected;
//                     Linear, GELU, Linear; an [IMG_BREAK] row after each row of the grid but the last
//   idefics3 (SmolVLM): the image in tiles and an overview (tile_grid), each through SigLIP as gemma3's;
//                     then merge x merge patches side by side (pixel shuffle) and one linear
//   gemma4v (Gemma 4): any size; pixels as 2x - 1; x = patches·Wpatch + col_table[col] + row_table[row];
//                     per layer: q, k RMS-normed per head, 2-D NEOX RoPE (first half by column, second by
//                     row, theta 100), v RMS-normed, attention at scale 1, an RMS norm after attention
//                     and after the gated FFN, the layer's output times its scalar; every linear clamps
//                     its input and output where the file gives bounds (Gemma4ClippableLinear);
//                     then avg_pool merge x merge, * sqrt(dim), (x - std_bias) * std_scale, rms_norm, Wproj
//   qwen25vl (Qwen2.5-VL): any size; one patch kernel (the 3-D kernel's two frames summed); patches in
//                     2 x 2 blocks, the blocks grouped by window; 2-D M-RoPE (height, width); RMS norms;
//                     attention within windows but every n_wa_pattern-th layer; SiLU-gated FFN; post
//                     norm; each block's 4 rows as one through Linear, GELU, Linear; back in grid order
//   qwen3vl (Qwen3-VL): any size; qwen25vl's patch kernel plus a bias, and its learned position table
//                     resized bilinearly to the grid; patches in 2 x 2 blocks; q, k, v from one matrix;
//                     2-D M-RoPE; layer norms; full attention; GELU FFN; post norm; each block's 4 rows
//                     through Linear, GELU, Linear; after each deepstack layer, the block's 4 rows normed
//                     and through its own Linear, GELU, Linear: those rows follow the main ones in each
//                     image row (info().row_width())
//
// The op list is built for one grid and rebuilt when an image of another grid arrives (dynamic sizes);
// buffers are sized at load for the largest.
//
// Not thread-safe: one encode at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "vision/mmproj_info.h"

namespace loom {
namespace gguf {
class GgufFile;
}

namespace vision {

// A linear's input and output bounds (gemma4v's clippable linears); struct_size 0: unbounded.
struct LinearClamp {
  loom_clamp_params input{}, output{};
};

class VisionEncoder {
 public:
  // loom::Error naming the file and the tensor or key, or the op the backend lacks.
  static std::unique_ptr<VisionEncoder> load(const std::filesystem::path& mmproj, Backend& backend);
  static std::unique_ptr<VisionEncoder> load(const gguf::GgufFile& file, Backend& backend);
  ~VisionEncoder();
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  const MmprojInfo& info() const { return info_; }
  uint64_t weight_bytes() const { return weights_.size(); }

  // The embedding rows of one image, [rows][info().row_width()] row-major (rows: info().rows_for its size; a
  // tiled projector's: each tile's rows, row by row, then the overview's).
  std::vector<float> encode(const RgbImage& image);
  // The same from preprocessed pixels (preprocess: planar [3][height][width]; fixed-size projectors:
  // the square).
  std::vector<float> encode_pixels(std::span<const float> pixels, uint32_t width, uint32_t height);
  std::vector<float> encode_pixels(std::span<const float> pixels) { return encode_pixels(pixels, info_.image_size, info_.image_size); }

 private:
  struct LayerWeights {
    loom_tensor ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, gate, gate_b, up, up_b, down, down_b;
    loom_tensor q_norm, k_norm, attn_post_norm, ffn_post_norm;  // gemma4v
    LinearClamp clamp_q, clamp_k, clamp_v, clamp_o, clamp_gate, clamp_up, clamp_down;
    loom_scale_params out_scale;  // gemma4v's layer scalar; struct_size 0: none
    loom_tensor qkv, qkv_b;       // qwen3vl: q, k, v in one matrix (wq, wk, wv are its row ranges)
  };
  struct DeepstackWeights {  // qwen3vl: a merger after one layer
    loom_tensor norm_w, norm_b, fc1, fc1_b, fc2, fc2_b;
  };
  VisionEncoder(MmprojInfo info, Backend& backend);
  void load_weights(const gguf::GgufFile& file);
  void allocate_scratch();
  void build_ops(int64_t gx, int64_t gy);  // vision_encoder_ops.cpp
  void upload_positions(int64_t gx, int64_t gy);  // the RoPE's positions (and Qwen's windows) of a grid
  void upload_resized_positions(int64_t gx, int64_t gy);  // qwen3vl: the position table resized to a grid

  MmprojInfo info_;
  Backend& backend_;
  Buffer weights_, compute_;
  loom_tensor patch_w_{}, patch_b_{}, pos_{}, class_{}, pre_ln_w_{}, pre_ln_b_{}, post_ln_w_{}, post_ln_b_{};
  loom_tensor proj_{}, soft_norm_{};          // gemma3
  loom_tensor mm0_w_{}, mm0_b_{}, mm2_w_{}, mm2_b_{};  // mlp (mm.0, mm.2); pixtral (mm.1, mm.2)
  loom_tensor merger_norm_{}, merger_{}, img_break_{};  // pixtral
  loom_tensor fc_{};                                   // idefics3
  loom_tensor std_bias_{}, std_scale_{};               // gemma4v (the bias stored negated); proj_ too
  LinearClamp proj_clamp_{};
  std::vector<LayerWeights> layers_;
  std::vector<DeepstackWeights> deepstack_;  // one per info().deepstack_layers
  std::vector<float> pos_table_;             // qwen3vl: v.position_embd [pos_side²][dim], resized per grid on the host
  int64_t pos_gx_ = 0, pos_gy_ = 0;          // the grid the resized table in compute_ is for
  std::vector<loom_op> ops_;
  int64_t ops_gx_ = 0, ops_gy_ = 0;  // the grid ops_ is built for
  // Scratch offsets (bytes into compute_), sized for the largest image.
  struct Scratch {
    uint64_t image, positions, windows, rope_factors, pos_resized, x, h, q, k, v, a, wide, wide2, merged, pool, hidden, pre_out, out;
  } at_{};
  int64_t max_patches_ = 0, max_cells_ = 0, max_rows_ = 0;
  // Params live here: ops borrow them.
  loom_norm_params norm_{};
  loom_encoder_attention_params attn_{};
  loom_patch_params patch_{};
  loom_pool_params pool_{};
  loom_glu_params ffn_act_{}, gelu_{};
  loom_rope_params rope_rows_{}, rope_cols_{};
  loom_scale_params pooled_scale_{};
};

}  // namespace vision
}  // namespace loom
