// Synthetic vision projectors: seeded random weights in llama.cpp's mmproj layout (clip.cpp's keys and
// tensor names), for tests that compare Loom's encoder with mtmd's on the same file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "loom/dtype.h"

namespace loom::gguf {

struct SynthMmprojSpec {
  std::string projector = "gemma3";  // or "mlp" (CLIP with a LLaVA 1.5 projector), "pixtral", "idefics3", "gemma4v", "qwen25vl", "qwen3vl"
  int image_size = 224;  // 896 in Gemma 3; smaller keeps tests fast
  int patch_size = 14;
  int dim = 64;
  int n_heads = 4;
  int n_layers = 2;
  int ff_dim = 128;
  int n_embd_text = 128;  // must equal the text model's width
  int merge = 4;          // gemma3's and gemma4v's pooling kernel
  int proj_hidden = 0;    // mlp: the projector's inner width (0: n_embd_text)
  int longest_edge = 0;   // idefics3: the longest side before tiling (0: 2 tiles)
  loom_dtype weight_type = LOOM_DTYPE_F16;  // of the ViT's matrices (the patch kernel is F32, as the converter writes it)
  uint64_t seed = 1;
};

void write_synthetic_mmproj(const SynthMmprojSpec& spec, const std::filesystem::path& out);

}  // namespace loom::gguf
