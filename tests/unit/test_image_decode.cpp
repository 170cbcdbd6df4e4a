// Images from requests: PNG, JPEG and WebP decode to the pixels they were made from (written here
// with the same libraries' encoders), and every hostile input is refused with an error naming the
// problem: truncated and corrupt files, another format, a header claiming more pixels than the limit
// (checked before any pixel is allocated), data: URLs that are not base64 or too large.
#include <catch2/catch.hpp>

#include <png.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include <cstring>

#include "common/error.h"
#include "vision/data_url.h"
#include "vision/image_decode.h"

namespace {

using loom::vision::RgbImage;

RgbImage gradient(uint32_t width, uint32_t height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  for (uint32_t y = 0; y < height; ++y) {
    for (uint32_t x = 0; x < width; ++x) {
      image.pixels.push_back(uint8_t(x * 255 / (width - 1)));
      image.pixels.push_back(uint8_t(y * 255 / (height - 1)));
      image.pixels.push_back(uint8_t((x + y) % 2 ? 200 : 40));
    }
  }
  return image;
}

std::vector<uint8_t> encode_png(const RgbImage& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = image.width;
  png.height = image.height;
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  REQUIRE(png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  REQUIRE(png_image_write_to_memory(&png, out.data(), &size, 0, image.pixels.data(), 0, nullptr));
  out.resize(size);
  return out;
}

std::vector<uint8_t> encode_jpeg(const RgbImage& image) {
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(handle, image.pixels.data(), int(image.width), 0, int(image.height), TJPF_RGB, &jpeg, &size,
                      TJSAMP_444, 95, 0) == 0);
  std::vector<uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

std::vector<uint8_t> encode_webp_lossless(const RgbImage& image) {
  uint8_t* webp = nullptr;
  const size_t size = WebPEncodeLosslessRGB(image.pixels.data(), int(image.width), int(image.height), int(image.width * 3), &webp);
  REQUIRE(size > 0);
  std::vector<uint8_t> out(webp, webp + size);
  WebPFree(webp);
  return out;
}

// PNG's chunk CRC (ISO 3309), to forge a consistent header.
uint32_t crc32_of(const uint8_t* data, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string base64(const std::vector<uint8_t>& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = uint32_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= bytes[i + 2];
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[n & 63] : '=';
  }
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes, const loom::vision::ImageLimits& limits = {}) {
  try {
    loom::vision::decode_image(bytes, limits);
  } catch (const loom::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("PNG, JPEG and WebP decode to the pixels they were written from", "[vision][image]") {
  const RgbImage source = gradient(37, 23);
  SECTION("PNG: lossless, exact") {
    const auto bytes = encode_png(source);
    CHECK(loom::vision::image_format_of(bytes) == loom::vision::ImageFormat::png);
    const RgbImage got = loom::vision::decode_image(bytes);
    CHECK(got.width == 37);
    CHECK(got.height == 23);
    CHECK(got.pixels == source.pixels);
  }
  SECTION("WebP lossless: exact") {
    const auto bytes = encode_webp_lossless(source);
    CHECK(loom::vision::image_format_of(bytes) == loom::vision::ImageFormat::webp);
    CHECK(loom::vision::decode_image(bytes).pixels == source.pixels);
  }
  SECTION("JPEG at quality 95, 4:4:4: within JPEG's loss") {
    const auto bytes = encode_jpeg(source);
    CHECK(loom::vision::image_format_of(bytes) == loom::vision::ImageFormat::jpeg);
    const RgbImage got = loom::vision::decode_image(bytes);
    REQUIRE(got.pixels.size() == source.pixels.size());
    double total = 0;
    for (size_t i = 0; i < got.pixels.size(); ++i) total += std::abs(int(got.pixels[i]) - int(source.pixels[i]));
    CHECK(total / double(got.pixels.size()) < 6.0);  // mean absolute error, of 255
  }
}

TEST_CASE("hostile images are refused with a message naming the problem", "[vision][image]") {
  const RgbImage source = gradient(64, 48);
  for (const auto& [name, bytes] : {std::pair{std::string("PNG"), encode_png(source)}, std::pair{std::string("JPEG"), encode_jpeg(source)},
                                    std::pair{std::string("WebP"), encode_webp_lossless(source)}}) {
    INFO(name);
    const std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + long(bytes.size() / 2));
    CHECK_THAT(error_of(truncated), Catch::StartsWith(name + " image:"));
    const std::vector<uint8_t> header_only(bytes.begin(), bytes.begin() + 16);
    CHECK_THAT(error_of(header_only), Catch::StartsWith(name + " image:"));
    // The decoder sees the header's 64 x 48 before it allocates: a limit below that refuses it.
    loom::vision::ImageLimits small;
    small.max_pixels = 64 * 48 - 1;
    CHECK_THAT(error_of(bytes, small), Catch::Contains("64x48 = 3072 pixels, over the limit of 3071"));
    loom::vision::ImageLimits few_bytes;
    few_bytes.max_bytes = bytes.size() - 1;
    CHECK_THAT(error_of(bytes, few_bytes), Catch::Contains("over the limit of"));
  }
  // A valid PNG header claiming 100000 x 100000 pixels (a decompression bomb's first step): refused
  // from the header alone, before 30 GB are asked for.
  auto bomb = encode_png(gradient(2, 2));
  const uint8_t huge[8] = {0x00, 0x01, 0x86, 0xa0, 0x00, 0x01, 0x86, 0xa0};
  std::memcpy(bomb.data() + 16, huge, 8);  // IHDR's width and height
  const uint32_t crc = crc32_of(bomb.data() + 12, 17);  // IHDR's type and data
  for (int i = 0; i < 4; ++i) bomb[29 + size_t(i)] = uint8_t(crc >> (24 - 8 * i));
  CHECK_THAT(error_of(bomb), Catch::Contains("100000x100000 = 10000000000 pixels, over the limit"));
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
  CHECK_THAT(error_of(gif), Catch::Contains("not PNG, JPEG or WebP"));
  CHECK_THAT(error_of({}), Catch::Contains("not PNG, JPEG or WebP"));
}

TEST_CASE("data: URLs carry base64 image bytes, and anything else is refused by name", "[vision][image]") {
  const auto png = encode_png(gradient(5, 4));
  const auto parsed = loom::vision::parse_data_url("data:image/png;base64," + base64(png), 1 << 20);
  CHECK(parsed.media_type == "image/png");
  CHECK(parsed.bytes == png);
  CHECK(loom::vision::decode_image(parsed.bytes).width == 5);
  auto error = [](const std::string& url, uint64_t max_bytes = 1 << 20) {
    try {
      loom::vision::parse_data_url(url, max_bytes);
    } catch (const loom::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error("https://example.com/cat.png"), Catch::Contains("fetches nothing over the network"));
  CHECK_THAT(error("data:image/png,rawbytes"), Catch::Contains("must be base64"));
  CHECK_THAT(error("data:image/png;base64,iVBO$RwK"), Catch::Contains("outside base64 at position 4"));
  CHECK_THAT(error("data:image/png;base64,iVBORw0KG"), Catch::Contains("ends mid-character"));
  CHECK_THAT(error("data:image/png;base64," + base64(png), png.size() - 1), Catch::Contains("over the limit"));
  CHECK_THAT(error("data:image/png;base64"), Catch::Contains("no ','"));
}
