#include "vision/data_url.h"

#include "common/base64.h"
#include "common/error.h"

namespace loom::vision {

DataUrl parse_data_url(std::string_view url, uint64_t max_bytes) {
  if (url.substr(0, 5) != "data:") {
    throw Error("only data: URLs are accepted (base64 image bytes inline); Loom fetches nothing over the network");
  }
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) throw Error("data: URL has no ',' before its data");
  const std::string_view header = url.substr(5, comma - 5);
  const size_t marker = header.rfind(";base64");
  if (marker == std::string_view::npos || marker + 7 != header.size()) {
    throw Error("data: URL must be base64 (data:<media type>;base64,...)");
  }
  DataUrl out;
  out.media_type = std::string(header.substr(0, header.find(';')));
  const std::string_view data = url.substr(comma + 1);
  if (uint64_t(data.size()) / 4 * 3 > max_bytes + 3) {
    throw Error("image of about " + std::to_string(uint64_t(data.size()) / 4 * 3) + " bytes is over the limit of " +
                std::to_string(max_bytes));
  }
  out.bytes = decode_base64(data, "data: URL's data");
  if (out.bytes.size() > max_bytes) {
    throw Error("image of " + std::to_string(out.bytes.size()) + " bytes is over the limit of " + std::to_string(max_bytes));
  }
  return out;
}

}  // namespace loom::vision
