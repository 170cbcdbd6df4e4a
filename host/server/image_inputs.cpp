#include "server/image_inputs.h"

#include <fstream>

#include "common/error.h"
#include "server/api_error.h"
#include "vision/data_url.h"
#include "vision/image_decode.h"

namespace loom::server {

namespace {

// The bytes of a file:// URL, only from inside the allowed folder (after resolving links and "..").
std::vector<uint8_t> read_local_image(const std::string& url, const ServerSettings& settings, const std::string& where) {
  if (settings.allowed_local_media_path.empty())
    throw invalid_param(where, where + ": file:// image URLs are off on this server (set [server] allowed_local_media_path to a folder)");
  std::error_code root_error, path_error;
  const auto root = std::filesystem::weakly_canonical(settings.allowed_local_media_path, root_error);
  const auto path = std::filesystem::weakly_canonical(std::filesystem::path(url.substr(7)), path_error);
  const auto rel = path.lexically_relative(root);
  if (root_error || path_error || rel.empty() || rel.native().starts_with(".."))
    throw invalid_param(where, where + ": the file '" + url.substr(7) + "' is outside [server] allowed_local_media_path");
  // Links were resolved above; a FIFO or device would block the worker or never end.
  std::error_code type_error;
  if (!std::filesystem::is_regular_file(path, type_error))
    throw invalid_param(where, where + ": '" + url.substr(7) + "' is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw invalid_param(where, where + ": cannot read the file '" + url.substr(7) + "'");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size > uint64_t(settings.max_image_bytes))
    throw invalid_param(where, where + ": the image is " + std::to_string(size) + " bytes, over the limit of " +
                                   std::to_string(settings.max_image_bytes) + " ([server] max_image_bytes)");
  in.seekg(0);
  std::vector<uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  return bytes;
}

}  // namespace

std::vector<EncodedImage> resolve_images(Engine& engine, const ServerSettings& settings, const std::vector<ImageInput>& images) {
  if (images.empty()) return {};
  if (!engine.takes_images())
    throw invalid_param(images.front().where, images.front().where + ": this model takes no images (text-only: no vision encoder is loaded)");
  if (images.size() > uint64_t(settings.max_images_per_request))
    throw invalid_param(images[size_t(settings.max_images_per_request)].where,
                        images[size_t(settings.max_images_per_request)].where + ": too many images: " + std::to_string(images.size()) + " in the request, at most " +
                            std::to_string(settings.max_images_per_request) + " ([server] max_images_per_request)");
  const vision::ImageLimits limits{uint64_t(settings.max_image_bytes), uint64_t(settings.max_image_pixels)};
  std::vector<EncodedImage> out;
  for (const ImageInput& image : images) {
    try {
      std::vector<uint8_t> bytes;
      if (image.url.starts_with("data:")) bytes = vision::parse_data_url(image.url, limits.max_bytes).bytes;
      else if (image.url.starts_with("file://")) bytes = read_local_image(image.url, settings, image.where);
      else throw Error("Loom does not fetch images over the network; send the image inline as a data: URL (data:image/png;base64,...)");
      out.push_back(engine.encode_image(vision::decode_image(bytes, limits)));
    } catch (const ApiError&) {
      throw;
    } catch (const Error& e) {
      throw invalid_param(image.where, image.where + ": " + e.what());
    }
  }
  return out;
}

}  // namespace loom::server
