// A tiny reader for the flat config object passed to create, e.g. {"threads": 2, "reference": true}.
// The plugin may use only the C ABI headers and the standard library, so no JSON library here.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace loom::plugin_support {

// Top-level scalar members as raw text: strings unquoted, numbers/true/false/null verbatim.
// Nested objects and arrays are skipped. Throws std::invalid_argument (naming the key or offset) on malformed JSON
// or a value of the wrong type; create maps it to LOOM_STATUS_INVALID_ARGUMENT.
std::map<std::string, std::string> parse_flat_json(const std::string& text);

std::optional<bool> json_bool(const std::map<std::string, std::string>& obj, const std::string& key);
std::optional<long long> json_int(const std::map<std::string, std::string>& obj, const std::string& key);
std::optional<std::string> json_string(const std::map<std::string, std::string>& obj, const std::string& key);

}  // namespace loom::plugin_support
