#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace loom::vision {

namespace {

constexpr int kPrecisionBits = 22;  // Pillow's PRECISION_BITS for 8-bit images

double bilinear_filter(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_filter(double x) {
  constexpr double a = -0.5;  // Pillow's bicubic
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double lanczos_filter(double x) {  // Pillow's lanczos: sinc(x) sinc(x / 3) on [-3, 3)
  if (!(-3.0 <= x && x < 3.0)) return 0.0;
  auto sinc = [](double v) {
    if (v == 0.0) return 1.0;
    const double pi_v = v * 3.141592653589793238462643383279502884;
    return std::sin(pi_v) / pi_v;
  };
  return sinc(x) * sinc(x / 3.0);
}

double filter_value(ResizeFilter filter, double x) {
  switch (filter) {
    case ResizeFilter::bilinear: return bilinear_filter(x);
    case ResizeFilter::bicubic: return bicubic_filter(x);
    case ResizeFilter::lanczos: return lanczos_filter(x);
  }
  return 0.0;
}

// One output sample's window of input samples and their fixed-point weights.
struct Tap {
  int first = 0;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for one dimension.
std::vector<Tap> resample_taps(int in_size, int out_size, ResizeFilter filter) {
  const double support_base = filter == ResizeFilter::bilinear ? 1.0 : filter == ResizeFilter::bicubic ? 2.0 : 3.0;
  const double scale = double(in_size) / double(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_base * filter_scale;
  std::vector<Tap> taps(static_cast<size_t>(out_size));
  std::vector<double> w;
  for (int xx = 0; xx < out_size; xx++) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    const int xmin = std::max(int(center - support + 0.5), 0);
    const int xmax = std::min(int(center + support + 0.5), in_size);
    w.assign(static_cast<size_t>(std::max(xmax - xmin, 0)), 0.0);
    double total = 0.0;
    for (size_t x = 0; x < w.size(); x++) {
      const double t = (double(x) + xmin - center + 0.5) * ss;
      total += w[x] = filter_value(filter, t);
    }
    Tap& tap = taps[static_cast<size_t>(xx)];
    tap.first = xmin;
    for (double v : w) {
      const double k = total != 0.0 ? v / total : v;
      tap.weights.push_back(int32_t(k * (1 << kPrecisionBits) + (k < 0.0 ? -0.5 : 0.5)));
    }
  }
  return taps;
}

uint8_t clip8(int32_t acc) { return uint8_t(std::clamp(acc >> kPrecisionBits, 0, 255)); }

// One pass along x (horizontal) or y, every channel.
RgbImage resample_pass(const RgbImage& src, uint32_t out_size, bool horizontal, ResizeFilter filter) {
  RgbImage out;
  out.width = horizontal ? out_size : src.width;
  out.height = horizontal ? src.height : out_size;
  out.pixels.resize(size_t(out.width) * out.height * 3);
  const auto taps = resample_taps(int(horizontal ? src.width : src.height), int(out_size), filter);
  for (uint32_t y = 0; y < out.height; y++)
    for (uint32_t x = 0; x < out.width; x++) {
      const Tap& tap = taps[horizontal ? x : y];
      for (int c = 0; c < 3; c++) {
        int32_t acc = 1 << (kPrecisionBits - 1);
        for (size_t k = 0; k < tap.weights.size(); k++) {
          const size_t sx = horizontal ? size_t(tap.first) + k : x, sy = horizontal ? y : size_t(tap.first) + k;
          acc += int32_t(src.pixels[(sy * src.width + sx) * 3 + size_t(c)]) * tap.weights[k];
        }
        out.pixels[(size_t(y) * out.width + x) * 3 + size_t(c)] = clip8(acc);
      }
    }
  return out;
}

}  // namespace

RgbImage resize_like_pillow(const RgbImage& src, uint32_t width, uint32_t height, ResizeFilter filter) {
  if (src.width == 0 || src.height == 0 || width == 0 || height == 0) throw Error("image resize: empty image or target");
  RgbImage out = src;
  if (width != src.width) out = resample_pass(out, width, /*horizontal=*/true, filter);
  if (height != src.height) out = resample_pass(out, height, /*horizontal=*/false, filter);
  return out;
}

Letterbox letterbox_for(uint32_t src_width, uint32_t src_height, uint32_t size) { return letterbox_for(src_width, src_height, size, size); }

Letterbox letterbox_for(uint32_t src_width, uint32_t src_height, uint32_t target_width, uint32_t target_height) {
  // float32 arithmetic and ceil, as mtmd's img_tool::resize (PAD_CEIL): 488 * 1.4f lands just above
  // 683.2, so a 640x488 image becomes 896x684.
  const float scale = std::min(float(target_width) / float(src_width), float(target_height) / float(src_height));
  Letterbox box;
  box.width = std::min(uint32_t(std::ceil(float(src_width) * scale)), target_width);
  box.height = std::min(uint32_t(std::ceil(float(src_height) * scale)), target_height);
  box.offset_x = (target_width - box.width) / 2;
  box.offset_y = (target_height - box.height) / 2;
  return box;
}

namespace {

// The encoder's planar input [3][height][width] of an 8-bit image: (pixel / 255 - mean) / std.
std::vector<float> planar(const RgbImage& image, const PreprocessSpec& spec) {
  const size_t plane = size_t(image.width) * image.height;
  std::vector<float> out(3 * plane);
  for (size_t p = 0; p < plane; p++)
    for (size_t c = 0; c < 3; c++) out[c * plane + p] = (float(image.pixels[p * 3 + c]) / 255.0f - spec.mean[c]) / spec.std[c];
  return out;
}

}  // namespace

ImageSize target_size(const PreprocessSpec& spec, uint32_t src_width, uint32_t src_height) {
  if (spec.align == 0) return {spec.size, spec.size};
  // mtmd's calc_size_preserved_ratio, float for float: round to the alignment, then scale down to
  // max_pixels (floor) or up to min_pixels (ceil).
  const int f = int(spec.align), width = int(src_width), height = int(src_height);
  auto round_by = [f](float x) { return int(std::round(x / float(f))) * f; };
  auto ceil_by = [f](float x) { return int(std::ceil(x / float(f))) * f; };
  auto floor_by = [f](float x) { return int(std::floor(x / float(f))) * f; };
  int w = std::max(f, round_by(float(width))), h = std::max(f, round_by(float(height)));
  if (spec.max_pixels > 0 && uint64_t(h) * uint64_t(w) > spec.max_pixels) {
    const float beta = std::sqrt(float(height) * float(width) / float(spec.max_pixels));
    h = std::max(f, floor_by(float(height) / beta));
    w = std::max(f, floor_by(float(width) / beta));
  } else if (spec.min_pixels > 0 && uint64_t(h) * uint64_t(w) < spec.min_pixels) {
    const float beta = std::sqrt(float(spec.min_pixels) / (float(height) * float(width)));
    h = ceil_by(float(height) * beta);
    w = ceil_by(float(width) * beta);
  }
  return {uint32_t(w), uint32_t(h)};
}

PreprocessedImage preprocess(const RgbImage& image, const PreprocessSpec& spec) {
  const ImageSize target = target_size(spec, image.width, image.height);
  if (target.width == 0 || target.height == 0) throw Error("image preprocessing: the encoder's image size is 0");
  const uint32_t tw = target.width, th = target.height;
  RgbImage boxed;
  if (image.width == tw && image.height == th) {
    boxed = image;
  } else {
    const Letterbox box = letterbox_for(image.width, image.height, tw, th);
    const RgbImage resized = resize_like_pillow(image, box.width, box.height, spec.filter);
    boxed.width = tw;
    boxed.height = th;
    boxed.pixels.resize(size_t(tw) * th * 3);
    for (size_t i = 0; i < boxed.pixels.size(); i++) boxed.pixels[i] = spec.pad_color[i % 3];
    for (uint32_t y = 0; y < box.height; y++)
      std::copy_n(&resized.pixels[size_t(y) * box.width * 3], size_t(box.width) * 3,
                  &boxed.pixels[((size_t(box.offset_y) + y) * tw + box.offset_x) * 3]);
  }
  return {tw, th, planar(boxed, spec)};
}

namespace {

// mtmd's idefics3 first step: the longest side to longest_edge, the other in proportion (truncated,
// then made even).
ImageSize longest_edge_size(uint32_t longest, uint32_t src_width, uint32_t src_height) {
  const double aspect = double(src_width) / double(src_height);
  ImageSize size;
  if (src_width >= src_height) {
    size.width = longest;
    size.height = uint32_t(int(double(longest) / aspect));
    size.height += size.height % 2;
  } else {
    size.height = longest;
    size.width = uint32_t(int(double(longest) * aspect));
    size.width += size.width % 2;
  }
  return size;
}

RgbImage resize_exact(const RgbImage& image, uint32_t width, uint32_t height, ResizeFilter filter) {
  if (image.width == width && image.height == height) return image;
  return resize_like_pillow(image, width, height, filter);
}


}  // namespace

TileGrid tile_grid(const PreprocessSpec& spec, uint32_t src_width, uint32_t src_height) {
  if (spec.longest_edge == 0 || spec.size == 0) return {};
  const ImageSize resized = longest_edge_size(spec.longest_edge, src_width, src_height);
  return {(resized.width + spec.size - 1) / spec.size, (resized.height + spec.size - 1) / spec.size};
}

std::vector<std::vector<float>> preprocess_tiles(const RgbImage& image, const PreprocessSpec& spec) {
  if (spec.longest_edge == 0 || spec.size == 0) throw Error("image preprocessing: the projector does not tile images");
  const uint32_t tile = spec.size;
  const ImageSize resized_size = longest_edge_size(spec.longest_edge, image.width, image.height);
  if (resized_size.width == 0 || resized_size.height == 0) throw Error("image preprocessing: the image is too thin to tile");
  const TileGrid grid = tile_grid(spec, image.width, image.height);
  // Stretched, not letterboxed: to the longest edge, then up to whole tiles, then the overview from that.
  const RgbImage resized = resize_exact(image, resized_size.width, resized_size.height, spec.filter);
  const RgbImage refined = resize_exact(resized, grid.columns * tile, grid.rows * tile, spec.filter);
  std::vector<std::vector<float>> out;
  for (uint32_t ty = 0; ty < grid.rows; ty++)
    for (uint32_t tx = 0; tx < grid.columns; tx++) {
      RgbImage crop;
      crop.width = crop.height = tile;
      crop.pixels.resize(size_t(tile) * tile * 3);
      for (uint32_t y = 0; y < tile; y++)
        std::copy_n(&refined.pixels[((size_t(ty) * tile + y) * refined.width + size_t(tx) * tile) * 3], size_t(tile) * 3,
                    &crop.pixels[size_t(y) * tile * 3]);
      out.push_back(planar(crop, spec));
    }
  out.push_back(planar(resize_exact(refined, tile, tile, spec.filter), spec));
  return out;
}

std::vector<float> preprocess_image(const RgbImage& image, const PreprocessSpec& spec) {
  if (spec.size == 0) throw Error("image preprocessing: the encoder's image size is 0");
  return preprocess(image, spec).pixels;
}

}  // namespace loom::vision
