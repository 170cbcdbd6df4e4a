// What a vision encoder sees: the request's RGB image resized and normalised exactly as llama.cpp's
// mtmd preprocessor does (tools/mtmd/mtmd-image.cpp), so Loom's pixels equal the reference's.
// The resize is Pillow's 8-bit resampler (fixed point, 22 fractional bits, horizontal pass first)
// and keeps the aspect ratio: the image is scaled to fit the encoder's square and centred on a
// pad colour (letterboxed), not stretched.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vision/image_decode.h"

namespace loom::vision {

enum class ResizeFilter { bilinear, bicubic, lanczos };

// Pillow's Image.resize((width, height), BILINEAR | BICUBIC | LANCZOS) on 8-bit RGB.
RgbImage resize_like_pillow(const RgbImage& src, uint32_t width, uint32_t height, ResizeFilter filter);

struct PreprocessSpec {
  uint32_t size = 0;  // the encoder's square input, in pixels (fixed-size projectors)
  // Dynamic resolution (pixtral): a target that keeps the image's aspect ratio, sides multiples of
  // `align`, area within [min_pixels, max_pixels] (mtmd's calc_size_preserved_ratio). 0: the square.
  uint32_t align = 0;
  uint64_t min_pixels = 0, max_pixels = 0;
  // Tiled images (idefics3): the image is resized so its longest side is this long, then to whole
  // tiles of `size`; each tile and an overview of the whole go through the encoder. 0: not tiled.
  uint32_t longest_edge = 0;
  ResizeFilter filter = ResizeFilter::bilinear;
  std::array<uint8_t, 3> pad_color{0, 0, 0};
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> std{0.5f, 0.5f, 0.5f};
};

// Where the resized image lands in the square (the letterbox).
struct Letterbox {
  uint32_t width = 0, height = 0;      // of the resized image
  uint32_t offset_x = 0, offset_y = 0;  // of its top-left corner
};
Letterbox letterbox_for(uint32_t src_width, uint32_t src_height, uint32_t size);
Letterbox letterbox_for(uint32_t src_width, uint32_t src_height, uint32_t target_width, uint32_t target_height);

struct ImageSize {
  uint32_t width = 0, height = 0;
};
// The encoder's input size for an image of this size: the square, or the dynamic target.
ImageSize target_size(const PreprocessSpec& spec, uint32_t src_width, uint32_t src_height);

struct PreprocessedImage {
  uint32_t width = 0, height = 0;
  std::vector<float> pixels;  // planar [3][height][width] (x fastest)
};
// The encoder's input: the image letterboxed into target_size, (pixel / 255 - mean) / std.
PreprocessedImage preprocess(const RgbImage& image, const PreprocessSpec& spec);
// Tiled preprocessing (spec.longest_edge), as mtmd's idefics3 preprocessor: the tiles row by row, then
// the overview, each planar [3][size][size].
struct TileGrid {
  uint32_t columns = 0, rows = 0;
};
TileGrid tile_grid(const PreprocessSpec& spec, uint32_t src_width, uint32_t src_height);
std::vector<std::vector<float>> preprocess_tiles(const RgbImage& image, const PreprocessSpec& spec);
// The same for a fixed-size projector: planar [3][size][size].
std::vector<float> preprocess_image(const RgbImage& image, const PreprocessSpec& spec);

}  // namespace loom::vision
