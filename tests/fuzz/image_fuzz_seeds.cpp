// Seeds for image_fuzz: small PNG, JPEG and WebP (lossy and lossless) images from the libraries' own
// encoders, and a data: URL, so the fuzzer starts inside each decoder's valid input.
#include <png.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

void save(const std::string& path, const void* data, size_t size) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), std::streamsize(size));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  const int w = 13, h = 9;
  std::vector<uint8_t> rgb;
  for (int i = 0; i < w * h; ++i) rgb.insert(rgb.end(), {uint8_t(i * 7), uint8_t(i * 13), uint8_t(255 - i)});

  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t png_size = 1 << 16;
  std::vector<uint8_t> png_bytes(png_size);
  if (!png_image_write_to_memory(&png, png_bytes.data(), &png_size, 0, rgb.data(), 0, nullptr)) return 1;
  save(dir + "/seed.png", png_bytes.data(), png_size);

  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;
  if (tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &jpeg, &jpeg_size, TJSAMP_420, 80, 0) != 0) return 1;
  save(dir + "/seed.jpg", jpeg, jpeg_size);
  tjFree(jpeg);
  tjDestroy(tj);

  uint8_t* webp = nullptr;
  size_t webp_size = WebPEncodeRGB(rgb.data(), w, h, w * 3, 75.0f, &webp);
  save(dir + "/seed-lossy.webp", webp, webp_size);
  WebPFree(webp);
  webp_size = WebPEncodeLosslessRGB(rgb.data(), w, h, w * 3, &webp);
  save(dir + "/seed-lossless.webp", webp, webp_size);
  WebPFree(webp);

  const std::string url = "data:image/png;base64,iVBORw0KGgo=";
  save(dir + "/seed.url", url.data(), url.size());
  std::printf("wrote 5 seeds to %s\n", dir.c_str());
  return 0;
}
