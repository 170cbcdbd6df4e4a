// Base64 (RFC 4648), standard and URL-safe alphabets both, as clients and files carry it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// The bytes `text` spells (line breaks and spaces skipped, '=' padding at the end); loom::Error naming
// `what` and the position of a character outside base64, or a truncated last character.
std::vector<uint8_t> decode_base64(std::string_view text, const std::string& what);

}  // namespace loom
