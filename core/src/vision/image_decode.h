// Images from requests, decoded to 8-bit RGB: PNG (libpng), JPEG (libjpeg-turbo) and WebP (libwebp),
// the formats OpenAI's API and the peers accept. Every input is hostile until decoded: the format is
// told by its magic bytes, not by what the request claims, and the width and height in the header
// are checked against the limits before a pixel is allocated (decompression bombs). Anything else
// (a corrupt or truncated file, another format) is a loom::Error naming the format and the problem.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::vision {

enum class ImageFormat { unknown, png, jpeg, webp };

struct ImageLimits {
  uint64_t max_bytes = 20ull << 20;          // the encoded file
  uint64_t max_pixels = 4096ull * 4096ull;   // width * height
};

struct RgbImage {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [height][width][3], rows top to bottom
};

ImageFormat image_format_of(std::span<const uint8_t> bytes);
const char* image_format_name(ImageFormat format);
// The image, as RGB; alpha is dropped (composited over nothing: transparent pixels keep their colour).
RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

}  // namespace loom::vision
