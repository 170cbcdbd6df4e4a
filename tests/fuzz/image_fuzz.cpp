// libFuzzer target: any byte string must decode as an image or throw loom::Error, never crash, leak
// or read out of bounds (built with ASan + UBSan); the same bytes as a data: URL must parse or throw.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/error.h"
#include "vision/data_url.h"
#include "vision/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::vision::ImageLimits limits;
  limits.max_pixels = 1 << 22;  // 4 Mpixels: ASan's memory stays small however the header lies
  try {
    const auto image = loom::vision::decode_image(std::span<const uint8_t>(data, size), limits);
    if (image.pixels.size() != size_t(image.width) * image.height * 3) __builtin_trap();
    if (!image.pixels.empty()) {
      volatile uint8_t sink = image.pixels.back();
      (void)sink;
    }
  } catch (const loom::Error&) {
  }
  try {
    (void)loom::vision::parse_data_url(std::string_view(reinterpret_cast<const char*>(data), size), 1 << 16);
  } catch (const loom::Error&) {
  }
  return 0;
}
