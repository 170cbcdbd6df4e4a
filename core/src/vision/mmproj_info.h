// MmprojInfo — what a vision projector GGUF (llama.cpp's "mmproj" file, clip.cpp's keys) says about its
// encoder: the projector type, the ViT's shape, the preprocessing and how many embedding rows an image
// becomes. Read from the metadata and the tensor shapes, checked before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

#include "vision/image_preprocess.h"

namespace loom {
namespace gguf {
class GgufFile;
}

namespace vision {

enum class ProjectorType {
  gemma3,  // SigLIP, average-pooled k x k, RMS-normed, projected (Gemma 3 4B and up)
  mlp,     // CLIP, second-to-last layer's patch rows through a two-layer MLP (LLaVA 1.5 style)
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
  bool gelu_quick = false;  // the ViT's FFN activation: CLIP's quick GELU, else GELU (tanh)
  bool class_embedding = false;  // mlp: a CLS row (v.class_embd) joins the patches
  bool ffn_swapped = false;      // old converters named up and down the other way round (clip.cpp swaps them back)
  int64_t proj_hidden = 0;       // mlp: the width between the projector's two layers
  PreprocessSpec preprocess;

  int64_t grid() const { return image_size / patch_size; }            // patches per side
  int64_t n_patches() const { return grid() * grid(); }
  int64_t n_positions() const { return n_patches() + (class_embedding ? 1 : 0); }  // rows through the ViT
  int64_t n_image_tokens() const { return n_patches() / (int64_t(merge) * merge); }  // rows per image
};

// loom::Error naming the file and the key or tensor when the file is not a vision mmproj Loom runs.
MmprojInfo read_mmproj_info(const gguf::GgufFile& file);

}  // namespace vision
}  // namespace loom
