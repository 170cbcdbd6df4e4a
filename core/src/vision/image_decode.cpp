#include "vision/image_decode.h"

#include <png.h>
#include <turbojpeg.h>
#include <webp/decode.h>

#include <cstring>
#include <memory>

#include "common/error.h"

namespace loom::vision {

namespace {

[[noreturn]] void fail(ImageFormat format, const std::string& what) {
  throw Error(std::string(image_format_name(format)) + " image: " + what);
}

void check_size(ImageFormat format, uint64_t width, uint64_t height, const ImageLimits& limits) {
  if (width == 0 || height == 0) fail(format, "it has no pixels (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  if (width * height > limits.max_pixels) {
    fail(format, "it is " + std::to_string(width) + "x" + std::to_string(height) + " = " + std::to_string(width * height) +
                     " pixels, over the limit of " + std::to_string(limits.max_pixels));
  }
}

RgbImage with_size(uint32_t width, uint32_t height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(size_t(width) * height * 3);
  return image;
}

// libpng's simplified API reports errors in the image struct instead of longjmp.
RgbImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  auto finish = [&](const std::string& what) {
    const std::string message = what + (png.message[0] ? std::string(": ") + png.message : "");
    png_image_free(&png);
    fail(ImageFormat::png, message);
  };
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) finish("its header cannot be read");
  check_size(ImageFormat::png, png.width, png.height, limits);
  png.format = PNG_FORMAT_RGB;
  RgbImage image = with_size(png.width, png.height);
  if (!png_image_finish_read(&png, nullptr, image.pixels.data(), 0, nullptr)) finish("it is corrupt or truncated");
  png_image_free(&png);
  return image;
}

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  if (!handle) fail(ImageFormat::jpeg, "the decoder cannot start");
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height,
                          &subsampling, &colorspace) != 0) {
    fail(ImageFormat::jpeg, std::string("its header cannot be read: ") + tjGetErrorStr2(handle.get()));
  }
  check_size(ImageFormat::jpeg, uint64_t(width), uint64_t(height), limits);
  RgbImage image = with_size(uint32_t(width), uint32_t(height));
  // TJFLAG_STOPONWARNING: a truncated JPEG is an error, not a grey lower half.
  if (tjDecompress2(handle.get(), bytes.data(), static_cast<unsigned long>(bytes.size()), image.pixels.data(), width, 0,
                    height, TJPF_RGB, TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING) != 0) {
    fail(ImageFormat::jpeg, std::string("it is corrupt or truncated: ") + tjGetErrorStr2(handle.get()));
  }
  return image;
}

RgbImage decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  int width = 0, height = 0;
  if (!WebPGetInfo(bytes.data(), bytes.size(), &width, &height)) fail(ImageFormat::webp, "its header cannot be read");
  check_size(ImageFormat::webp, uint64_t(width), uint64_t(height), limits);
  RgbImage image = with_size(uint32_t(width), uint32_t(height));
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), image.pixels.data(), image.pixels.size(), width * 3)) {
    fail(ImageFormat::webp, "it is corrupt or truncated");
  }
  return image;
}

}  // namespace

ImageFormat image_format_of(std::span<const uint8_t> b) {
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), png, 8) == 0) return ImageFormat::png;
  if (b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return ImageFormat::jpeg;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return ImageFormat::webp;
  return ImageFormat::unknown;
}

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::png: return "PNG";
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.size() > limits.max_bytes) {
    throw Error("image of " + std::to_string(bytes.size()) + " bytes is over the limit of " + std::to_string(limits.max_bytes));
  }
  switch (image_format_of(bytes)) {
    case ImageFormat::png: return decode_png(bytes, limits);
    case ImageFormat::jpeg: return decode_jpeg(bytes, limits);
    case ImageFormat::webp: return decode_webp(bytes, limits);
    case ImageFormat::unknown: break;
  }
  throw Error("unsupported image format: not PNG, JPEG or WebP (by its first bytes)");
}

}  // namespace loom::vision
