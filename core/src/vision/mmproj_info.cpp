#include "vision/mmproj_info.h"

#include <cmath>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace loom::vision {

const char* projector_type_name(ProjectorType type) {
  switch (type) {
    case ProjectorType::gemma3: return "gemma3";
    case ProjectorType::mlp: return "mlp";
    case ProjectorType::pixtral: return "pixtral";
    case ProjectorType::idefics3: return "idefics3";
    case ProjectorType::gemma4v: return "gemma4v";
    case ProjectorType::qwen25vl: return "qwen25vl";
    case ProjectorType::qwen3vl: return "qwen3vl";
  }
  return "?";
}

namespace {

uint64_t required_uint(const gguf::GgufFile& file, const std::string& key) {
  const auto v = file.get_uint(key);
  if (!v) throw Error(file.label() + ": mmproj key '" + key + "' is missing");
  return *v;
}

}  // namespace

namespace {

// LLaVA's and Pixtral's projector, Linear-GELU-Linear: `first` [dim, hidden] then mm.2 [hidden, n_embd_text].
void read_two_layer_projector(const gguf::GgufFile& file, const std::string& first, MmprojInfo& info) {
  const std::string& label = file.label();
  const gguf::TensorInfo* in = file.find_tensor(first + ".weight");
  const gguf::TensorInfo* out = file.find_tensor("mm.2.weight");
  if (in == nullptr || in->dims.size() != 2 || in->dims[0] != info.dim)
    throw Error(label + ": tensor '" + first + ".weight' is missing or not [" + std::to_string(info.dim) + ", hidden]");
  info.proj_hidden = in->dims[1];
  if (out == nullptr || out->dims.size() != 2 || out->dims[0] != info.proj_hidden)
    throw Error(label + ": tensor 'mm.2.weight' is missing or not [" + std::to_string(info.proj_hidden) + ", n_embd_text]");
  info.n_embd_text = out->dims[1];
}

int64_t info_tiles_per_side(const MmprojInfo& m) {
  return m.tiled() ? (int64_t(m.preprocess.longest_edge) + m.image_size - 1) / m.image_size : 0;
}

// mtmd's dynamic-size preprocessing (its dyn_size preprocessor): the image keeps its aspect ratio, its
// sides multiples of patch x merge, between min_cells and max_cells merged cells, bicubic, letterboxed
// on black. `info.merge` must be set.
void set_dynamic_size(MmprojInfo& info, uint64_t min_cells, uint64_t max_cells) {
  const uint64_t cell = uint64_t(info.patch_size) * info.merge;
  info.preprocess.align = uint32_t(cell);
  info.preprocess.min_pixels = min_cells * cell * cell;
  info.preprocess.max_pixels = max_cells * cell * cell;
  info.preprocess.filter = ResizeFilter::bicubic;
  info.preprocess.pad_color = {0, 0, 0};
}

// Gemma 4's encoder: any size (mtmd's limits of 70 to 1120 pooled cells, bicubic), merge x merge average
// pooling (pooling_kernel_size, 3 unless the file says), the blocks' extra norms and position tables.
void read_gemma4v(const gguf::GgufFile& file, MmprojInfo& info) {
  const std::string& label = file.label();
  info.merge = uint32_t(file.get_uint("clip.vision.projector.scale_factor").value_or(3));
  if (info.merge == 0 || info.merge > 8) throw Error(label + ": clip.vision.projector.scale_factor must be 1..8");
  set_dynamic_size(info, 70, 1120);
  info.rms_norm = true;
  info.gemma4_blocks = true;
  info.rope_theta = 100.0f;
  if (info.head_dim % 4 != 0) throw Error(label + ": gemma4v's 2-D RoPE needs a head size that is a multiple of 4");
  const gguf::TensorInfo* pos = file.find_tensor("v.position_embd.weight");
  if (pos == nullptr || pos->dims.size() != 3 || pos->dims[0] != info.dim || pos->dims[2] != 2 || pos->dims[1] < 1 || pos->dims[1] > 65536)
    throw Error(label + ": tensor 'v.position_embd.weight' is missing or not [" + std::to_string(info.dim) + ", positions, 2]");
  info.pos_table = pos->dims[1];
  const gguf::TensorInfo* proj = file.find_tensor("mm.input_projection.weight");
  if (proj == nullptr || proj->dims.size() != 2 || proj->dims[0] != info.dim)
    throw Error(label + ": tensor 'mm.input_projection.weight' is missing or not [" + std::to_string(info.dim) + ", n_embd_text]");
  info.n_embd_text = proj->dims[1];
}

// What Qwen2.5-VL's and Qwen3-VL's towers share: any size (8 to 4096 merged cells, bicubic, letterboxed),
// 2 x 2 merging, the 2-D M-RoPE, the 3-D patch kernel's second frame, and the merger (mm.0 over a
// block's 4 rows, mm.2 into the text width).
void read_qwen_vision(const gguf::GgufFile& file, MmprojInfo& info, const char* type) {
  const std::string& label = file.label();
  info.merge = uint32_t(file.get_uint("clip.vision.spatial_merge_size").value_or(2));
  if (info.merge != 2)
    throw Error(label + ": clip.vision.spatial_merge_size must be 2 for " + type + " (mtmd's positions assume it)");
  set_dynamic_size(info, 8, 4096);
  info.rope_theta = 10000.0f;
  if (info.head_dim % 4 != 0) throw Error(label + ": " + type + "'s 2-D M-RoPE needs a head size that is a multiple of 4");
  if (file.find_tensor("v.patch_embd.weight.1") == nullptr)
    throw Error(label + ": tensor 'v.patch_embd.weight.1' is missing (the second frame of Qwen's 3-D patch kernel)");
  const int64_t merged = info.dim * 4;
  const gguf::TensorInfo* in = file.find_tensor("mm.0.weight");
  if (in == nullptr || in->dims.size() != 2 || in->dims[0] != merged)
    throw Error(label + ": tensor 'mm.0.weight' is missing or not [" + std::to_string(merged) + ", hidden]");
  info.proj_hidden = in->dims[1];
  const gguf::TensorInfo* out = file.find_tensor("mm.2.weight");
  if (out == nullptr || out->dims.size() != 2 || out->dims[0] != info.proj_hidden)
    throw Error(label + ": tensor 'mm.2.weight' is missing or not [" + std::to_string(info.proj_hidden) + ", n_embd_text]");
  info.n_embd_text = out->dims[1];
}

// Qwen2.5-VL's encoder: any size (8 to 4096 merged cells, bicubic, letterboxed), 2 x 2 merging, RMS
// norms, window attention every layer but each n_wa_pattern-th, a two-layer merger (mm.0, mm.2).
void read_qwen25vl(const gguf::GgufFile& file, MmprojInfo& info) {
  const std::string& label = file.label();
  read_qwen_vision(file, info, "qwen25vl");
  info.rms_norm = true;
  const auto pattern = file.get_uint("clip.vision.n_wa_pattern");
  if (!pattern || *pattern == 0 || *pattern > uint64_t(info.n_layers))
    throw Error(label + ": clip.vision.n_wa_pattern (which layers attend over the whole image) is missing or out of range");
  info.window_pattern = int64_t(*pattern);
  const uint64_t cell = info.preprocess.align;
  const uint64_t window = file.get_uint("clip.vision.window_size").value_or(112);
  if (window < cell || window > 4096) throw Error(label + ": clip.vision.window_size must be 1 to 4096 pixels and at least one merged cell");
  info.window_cells = int64_t(window / cell);
}

// Qwen3-VL's encoder: Qwen2.5-VL's sizes and patch kernel with a bias, a learned position table
// resized to each grid, layer norms, GELU FFNs, full attention in every layer, a 2 x 2 merger after
// the post norm, and deepstack mergers (norm over the block's 4 rows, fc1, GELU, fc2) after some layers.
void read_qwen3vl(const gguf::GgufFile& file, MmprojInfo& info) {
  const std::string& label = file.label();
  read_qwen_vision(file, info, "qwen3vl");
  const gguf::TensorInfo* pos = file.find_tensor("v.position_embd.weight");
  if (pos == nullptr || pos->dims.size() != 2 || pos->dims[0] != info.dim)
    throw Error(label + ": tensor 'v.position_embd.weight' is missing or not [" + std::to_string(info.dim) + ", positions]");
  info.pos_side = int64_t(std::llround(std::sqrt(double(pos->dims[1]))));
  if (info.pos_side * info.pos_side != pos->dims[1] || info.pos_side < 1)
    throw Error(label + ": tensor 'v.position_embd.weight' holds " + std::to_string(pos->dims[1]) + " positions, not a square grid");
  for (int64_t il = 0; il < info.n_layers; il++)
    if (file.find_tensor("v.deepstack." + std::to_string(il) + ".fc1.weight") != nullptr) info.deepstack_layers.push_back(il);
}

}  // namespace

int64_t MmprojInfo::square_image_rows() const {
  if (tiled()) {  // the tiles of a square image at the longest edge, and the overview
    const int64_t side = info_tiles_per_side(*this);
    return (side * side + 1) * n_image_tokens();
  }
  if (!dynamic()) return n_image_tokens();
  const auto side = uint32_t(std::sqrt(double(preprocess.max_pixels)) / preprocess.align) * preprocess.align;
  return rows_for(side, side);
}

MmprojInfo read_mmproj_info(const gguf::GgufFile& file) {
  const std::string& label = file.label();
  if (!file.get_bool("clip.has_vision_encoder").value_or(false))
    throw Error(label + ": not a vision projector (clip.has_vision_encoder is absent or false)");
  std::string type = file.get_string("clip.projector_type").value_or("");
  if (type.empty()) type = file.get_string("clip.vision.projector_type").value_or("");
  MmprojInfo info;
  if (type == "gemma3") {
    info.projector = ProjectorType::gemma3;
  } else if (type == "mlp") {
    info.projector = ProjectorType::mlp;
  } else if (type == "pixtral") {
    info.projector = ProjectorType::pixtral;
  } else if (type == "idefics3") {
    info.projector = ProjectorType::idefics3;
  } else if (type == "gemma4v") {
    info.projector = ProjectorType::gemma4v;
  } else if (type == "qwen2.5vl_merger") {  // clip.cpp's names for them
    info.projector = ProjectorType::qwen25vl;
  } else if (type == "qwen3vl_merger") {
    info.projector = ProjectorType::qwen3vl;
  } else {
    throw Error(label + ": projector type '" + type + "' is not supported (Loom runs: gemma3, gemma4v, mlp, pixtral, idefics3, qwen25vl, qwen3vl)");
  }
  info.dim = int64_t(required_uint(file, "clip.vision.embedding_length"));
  info.n_heads = int64_t(required_uint(file, "clip.vision.attention.head_count"));
  info.n_layers = int64_t(required_uint(file, "clip.vision.block_count"));
  info.image_size = uint32_t(required_uint(file, "clip.vision.image_size"));
  info.patch_size = uint32_t(required_uint(file, "clip.vision.patch_size"));
  const auto eps = file.get_float("clip.vision.attention.layer_norm_epsilon");
  if (!eps) throw Error(label + ": mmproj key 'clip.vision.attention.layer_norm_epsilon' is missing");
  info.eps = float(*eps);
  const uint64_t head_dim = file.get_uint("clip.vision.attention.head_dim").value_or(0);
  if (info.n_heads <= 0 || info.dim <= 0 || info.n_layers <= 0) throw Error(label + ": the vision encoder's width, heads and layers must be positive");
  // Bounds far above any real encoder, so a corrupt header is an error here, not an allocation failure.
  if (info.n_layers > 512 || info.dim > 65536 || info.n_heads > 1024)
    throw Error(label + ": the vision encoder's " + std::to_string(info.n_layers) + " layers, width " + std::to_string(info.dim) + " or " +
                std::to_string(info.n_heads) + " heads are out of range (at most 512, 65536, 1024)");
  info.head_dim = head_dim != 0 ? int64_t(head_dim) : info.dim / info.n_heads;
  if (info.head_dim * info.n_heads != info.dim)
    throw Error(label + ": the vision encoder's heads (" + std::to_string(info.n_heads) + " x " + std::to_string(info.head_dim) +
                ") do not make its width " + std::to_string(info.dim));
  if (info.patch_size == 0 || info.image_size == 0 || info.image_size > 8192 || info.image_size % info.patch_size != 0)
    throw Error(label + ": image_size " + std::to_string(info.image_size) + " is not a positive multiple of patch_size " +
                std::to_string(info.patch_size) + " (at most 8192)");
  // clip.cpp's FFN activation: GELU (tanh) with use_gelu, SiLU with use_silu, CLIP's quick GELU otherwise.
  const bool use_gelu = file.get_bool("clip.use_gelu").value_or(false), use_silu = file.get_bool("clip.use_silu").value_or(false);
  if (use_gelu && use_silu) throw Error(label + ": both clip.use_gelu and clip.use_silu are set");
  info.silu = use_silu;
  info.gelu_quick = !use_gelu && !use_silu;
  info.ffn_gated = file.find_tensor("v.blk.0.ffn_gate.weight") != nullptr;
  info.n_layers_run = info.n_layers;

  const std::vector<float> mean = file.get_float_array("clip.vision.image_mean"), stdev = file.get_float_array("clip.vision.image_std");
  if (mean.size() < 3 || stdev.size() < 3) throw Error(label + ": clip.vision.image_mean and image_std need 3 values each");
  for (int c = 0; c < 3; c++) {
    if (!(stdev[size_t(c)] > 0.0f)) throw Error(label + ": clip.vision.image_std must be positive");
    info.preprocess.mean[size_t(c)] = mean[size_t(c)];
    info.preprocess.std[size_t(c)] = stdev[size_t(c)];
  }
  info.preprocess.size = info.image_size;

  // Old converters swapped up and down; clip.cpp recognises them by the down matrix taking the ViT's
  // width as its input, and swaps them back. Loom does the same, so both read such files alike.
  const gguf::TensorInfo* down = file.find_tensor("v.blk.0.ffn_down.weight");
  if (down == nullptr || down->dims.size() != 2) throw Error(label + ": tensor 'v.blk.0.ffn_down.weight' is missing or not a matrix");
  // (Only for the types clip.cpp checks: a pixtral FFN as wide as its ViT is read as named.)
  info.ffn_swapped = down->dims[0] == info.dim && info.projector != ProjectorType::pixtral && info.projector != ProjectorType::gemma4v &&
                     info.projector != ProjectorType::qwen3vl;
  const char* up_name = info.ffn_swapped ? "v.blk.0.ffn_down.weight" : "v.blk.0.ffn_up.weight";
  const gguf::TensorInfo* up = file.find_tensor(up_name);
  if (up == nullptr || up->dims.size() != 2) throw Error(label + ": tensor '" + up_name + "' is missing or not a matrix");
  info.ff_dim = up->dims[1];
  if (info.projector == ProjectorType::gemma3) {
    info.merge = uint32_t(file.get_uint("clip.vision.projector.scale_factor").value_or(4));
    if (info.merge == 0 || info.grid() % info.merge != 0)
      throw Error(label + ": the pooling factor " + std::to_string(info.merge) + " does not divide the " + std::to_string(info.grid()) +
                  " patches per side");
    info.preprocess.filter = ResizeFilter::bilinear;
    info.preprocess.pad_color = {0, 0, 0};
    const gguf::TensorInfo* proj = file.find_tensor("mm.input_projection.weight");
    if (proj == nullptr || proj->dims.size() != 2 || proj->dims[1] != info.dim)
      throw Error(label + ": tensor 'mm.input_projection.weight' is missing or not [n_embd_text, " + std::to_string(info.dim) + "]");
    info.n_embd_text = proj->dims[0];
  } else if (info.projector == ProjectorType::mlp) {
    // LLaVA 1.5: a fixed square, letterboxed on the dataset's mean colour, bicubic.
    if (file.find("clip.vision.image_grid_pinpoints") != nullptr)
      throw Error(label + ": image_grid_pinpoints (LLaVA 1.6's tiled images) is not supported; Loom's mlp projector takes one fixed-size image");
    if (file.find("clip.vision.feature_layer") != nullptr)
      throw Error(label + ": clip.vision.feature_layer (several stacked feature layers) is not supported by Loom's mlp projector");
    if (file.find_tensor("mm.3.weight") != nullptr)
      throw Error(label + ": an mlp projector with mm.3 (Yi-VL's normed projector, clip.cpp's mlp_norm) is not supported");
    info.preprocess.filter = ResizeFilter::bicubic;
    info.preprocess.pad_color = {122, 116, 104};
    info.class_embedding = file.find_tensor("v.class_embd") != nullptr;
    // LLaVA takes the second-to-last layer's output, so the last layer is never run.
    info.n_layers_run = info.n_layers - 1;
    read_two_layer_projector(file, "mm.0", info);
  } else if (info.projector == ProjectorType::pixtral) {
    // Any size: the image keeps its aspect ratio, its sides multiples of patch x merge, between 8 and
    // 1024 merged patches (clip.cpp's limits for pixtral), bicubic, letterboxed on black.
    info.merge = uint32_t(file.get_uint("clip.vision.spatial_merge_size").value_or(1));
    if (info.merge == 0 || info.merge > 8) throw Error(label + ": clip.vision.spatial_merge_size must be 1..8");
    set_dynamic_size(info, 8, 1024);
    info.rms_norm = true;
    info.rope_theta = 10000.0f;
    if (info.head_dim % 4 != 0) throw Error(label + ": pixtral's 2-D RoPE needs a head size that is a multiple of 4");
    info.patch_merger = file.find_tensor("mm.patch_merger.weight") != nullptr;
    if (info.merge > 1 && !info.patch_merger) throw Error(label + ": spatial_merge_size > 1 needs tensor 'mm.patch_merger.weight'");
    info.img_break = file.find_tensor("v.token_embd.img_break") != nullptr;
    read_two_layer_projector(file, "mm.1", info);
  }
  if (info.projector == ProjectorType::idefics3) {
    // SmolVLM: tiles of image_size after a resize to the longest edge (Lanczos, stretched), an overview,
    // each a SigLIP pass whose patch grid is pixel-shuffled merge x merge and projected by one linear.
    info.merge = uint32_t(file.get_uint("clip.vision.projector.scale_factor").value_or(0));
    if (info.merge < 2 || info.grid() % info.merge != 0)
      throw Error(label + ": clip.vision.projector.scale_factor must be at least 2 and divide the " + std::to_string(info.grid()) +
                  " patches per side");
    const uint64_t longest = file.get_uint("clip.vision.preproc_image_size").value_or(0);
    if (longest == 0 || longest > 16384)
      throw Error(label + ": clip.vision.preproc_image_size (the longest edge before tiling) is missing or out of range; Loom tiles idefics3 images by it");
    info.preprocess.longest_edge = uint32_t(longest);
    if ((longest + info.image_size - 1) / info.image_size > 16)
      throw Error(label + ": preproc_image_size " + std::to_string(longest) + " makes more than 16 tiles of " + std::to_string(info.image_size) +
                  " per side");
    info.preprocess.filter = ResizeFilter::lanczos;
    const gguf::TensorInfo* fc = file.find_tensor("mm.model.fc.weight");
    const int64_t merged = info.dim * info.merge * info.merge;
    if (fc == nullptr || fc->dims.size() != 2 || fc->dims[0] != merged)
      throw Error(label + ": tensor 'mm.model.fc.weight' is missing or not [" + std::to_string(merged) + ", n_embd_text]");
    info.n_embd_text = fc->dims[1];
  }
  if (info.projector == ProjectorType::gemma4v) read_gemma4v(file, info);
  if (info.projector == ProjectorType::qwen25vl) read_qwen25vl(file, info);
  if (info.projector == ProjectorType::qwen3vl) read_qwen3vl(file, info);
  if (info.silu && !info.ffn_gated) throw Error(label + ": clip.use_silu without v.blk.0.ffn_gate.weight is not supported");
  return info;
}

}  // namespace loom::vision
