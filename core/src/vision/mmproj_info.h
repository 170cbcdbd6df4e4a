// MmprojInfo — what a vision projector GGUF (llama.cpp's "mmproj" file, clip.cpp's keys) says about its
// encoder: the projector type, the ViT's shape, the preprocessing and how many embedding rows an image
// becomes. Read from the metadata and the tensor shapes, checked before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vision/image_preprocess.h"

namespace loom {
namespace gguf {
class GgufFile;
}

namespace vision {

enum class ProjectorType {
  gemma3,  // SigLIP, average-pooled k x k, RMS-normed, projected (Gemma 3 4B and up)
  mlp,     // CLIP, second-to-last layer's patch rows through a two-layer MLP (LLaVA 1.5 style)
  pixtral, // Pixtral / Mistral Small 3.x: any size, 2-D RoPE, RMS norms, SiLU-gated FFN, patch merger, [IMG_BREAK] rows
  idefics3,  // SmolVLM: SigLIP over tiles and an overview, pixel shuffle, one linear
  gemma4v,   // Gemma 4: any size, position tables, 2-D NEOX RoPE, q/k/v norms, sandwich norms, clamped linears, pooled
  qwen25vl,  // Qwen2.5-VL: any size, 2-D M-RoPE, window attention, SiLU-gated FFN, 2 x 2 patch merger; M-RoPE text positions
  qwen3vl,   // Qwen3-VL: any size, resized learned positions, 2-D M-RoPE, layer norms, 2 x 2 merger plus deepstack rows
};
const char* projector_type_name(ProjectorType type);

struct MmprojInfo {
  ProjectorType projector = ProjectorType::gemma3;
  uint32_t image_size = 0;  // the encoder's square input
  uint32_t patch_size = 0;
  int64_t dim = 0;          // the ViT's width
  int64_t ff_dim = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t n_layers = 0;
  float eps = 1e-6f;
  int64_t n_embd_text = 0;  // width of the rows the text model receives
  uint32_t merge = 1;       // gemma3: the pooling kernel
  int64_t n_layers_run = 0; // layers the encoder runs (mlp: all but the last, as LLaVA's feature layer -2)
  bool gelu_quick = false;  // the ViT's FFN activation: CLIP's quick GELU, SiLU, else GELU (tanh)
  bool silu = false;
  bool class_embedding = false;  // mlp: a CLS row (v.class_embd) joins the patches
  bool ffn_swapped = false;      // old converters named up and down the other way round (clip.cpp swaps them back)
  int64_t proj_hidden = 0;       // mlp: the width between the projector's two layers
  bool rms_norm = false;         // the ViT's norms are RMS norms (with weights), not layer norms
  bool ffn_gated = false;        // the ViT's FFN is down(silu(gate(x)) * up(x))
  float rope_theta = 0.0f;       // > 0: 2-D RoPE on q and k (first half of a head by row, second by column)
  bool patch_merger = false;     // pixtral: merge x merge neighbouring patches concatenated and projected
  bool img_break = false;        // pixtral: an [IMG_BREAK] row after each row of the grid but the last
  // gemma4v: a table of learned positions per axis (v.position_embd [dim, pos_table, 2]: columns,
  // then rows), per-head RMS norms on q and k and a plain one on v, the RoPE in NEOX halves (the first
  // half by column), RMS norms after attention and FFN, an attention scale of 1, pixels taken as 2x - 1.
  int64_t pos_table = 0;
  bool gemma4_blocks = false;
  // qwen25vl: patches in 2 x 2 blocks (each block's four rows together), the 2-D M-RoPE, and every
  // window_pattern-th layer attending over the whole image, the others within windows of
  // window_cells x window_cells merged cells.
  int64_t window_pattern = 0, window_cells = 0;
  // qwen3vl: the position table's side (v.position_embd [dim, side²], resized bilinearly to each grid),
  // and the layers whose output also goes through a deepstack merger: each image row then carries
  // n_embd_text values per merger after the main ones (row_width()).
  int64_t pos_side = 0;
  std::vector<int64_t> deepstack_layers;
  PreprocessSpec preprocess;

  int64_t grid() const { return image_size / patch_size; }            // patches per side
  int64_t row_width() const { return n_embd_text * (1 + int64_t(deepstack_layers.size())); }  // values per image row
  int64_t n_patches() const { return grid() * grid(); }
  int64_t n_positions() const { return n_patches() + (class_embedding ? 1 : 0); }  // rows through the ViT
  bool dynamic() const { return preprocess.align != 0; }
  bool tiled() const { return preprocess.longest_edge != 0; }
  // Rows an image preprocessed to width x height becomes (the merged grid, [IMG_BREAK] rows included).
  int64_t rows_for(uint32_t width, uint32_t height) const {
    const int64_t gx = width / patch_size / merge, gy = height / patch_size / merge;
    return gx * gy + (img_break ? gy - 1 : 0);
  }
  // The rows of the largest square image: what the engine sizes its prefill chunk for at load. (A very
  // long thin image may need more, up to twice the grid; it is refused per request if it does not fit.)
  int64_t square_image_rows() const;
  // The most rows one image puts in one piece of the prompt (a tile's, where images are tiled): what
  // one prefill chunk must hold.
  // (Without break rows, an image within max_pixels has at most max_pixels / align² cells, whatever its shape.)
  int64_t largest_part_rows() const {
    if (tiled()) return n_image_tokens();
    if (dynamic() && !img_break) return int64_t(preprocess.max_pixels / (uint64_t(preprocess.align) * preprocess.align));
    return square_image_rows();
  }
  int64_t n_image_tokens() const { return n_patches() / (int64_t(merge) * merge); }  // rows per image (fixed-size)
};

// loom::Error naming the file and the key or tensor when the file is not a vision mmproj Loom runs.
MmprojInfo read_mmproj_info(const gguf::GgufFile& file);

}  // namespace vision
}  // namespace loom
