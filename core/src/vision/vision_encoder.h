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

  // The embedding rows of one image, [n_image_tokens][n_embd_text] row-major.
  std::vector<float> encode(const RgbImage& image);
  // The same from preprocessed pixels (preprocess_image: planar [3][size][size]).
  std::vector<float> encode_pixels(std::span<const float> pixels);

 private:
  struct LayerWeights {
    loom_tensor ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, up, up_b, down, down_b;
  };
  VisionEncoder(MmprojInfo info, Backend& backend);
  void load_weights(const gguf::GgufFile& file);
  void build_ops();

  MmprojInfo info_;
  Backend& backend_;
  Buffer weights_, compute_;
  loom_tensor patch_w_{}, patch_b_{}, pos_{}, class_{}, pre_ln_w_{}, pre_ln_b_{}, post_ln_w_{}, post_ln_b_{};
  loom_tensor proj_{}, soft_norm_{};          // gemma3
  loom_tensor mm0_w_{}, mm0_b_{}, mm2_w_{}, mm2_b_{};  // mlp
  std::vector<LayerWeights> layers_;
  std::vector<loom_op> ops_;
  uint64_t off_image_ = 0, off_out_ = 0;
  // Params live here: ops borrow them.
  loom_norm_params norm_{};
  loom_encoder_attention_params attn_{};
  loom_patch_params patch_{};
  loom_pool_params pool_{};
  loom_glu_params ffn_act_{}, gelu_{};
};

}  // namespace vision
}  // namespace loom
