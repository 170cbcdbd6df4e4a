// An image sent inline, as OpenAI's API carries it: `data:image/png;base64,....` (RFC 2397). Loom
// fetches nothing over the network, so any other URL is refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::vision {

struct DataUrl {
  std::string media_type;  // as sent, e.g. "image/png" (the decoder trusts the bytes, not this)
  std::vector<uint8_t> bytes;
};

// loom::Error naming the problem: not a data: URL, not base64, a character outside base64 (and where),
// or more than max_bytes once decoded (checked before decoding).
DataUrl parse_data_url(std::string_view url, uint64_t max_bytes);

}  // namespace loom::vision
