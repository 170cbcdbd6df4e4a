// A tiny reader for the flat config object passed to create, e.g. {"threads": 2, "reference": true}.
// The plugin may use only the C ABI headers and the standard library, so no JSON library here.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace loom::cuda {

// Top-level scalar members as raw text: strings unquoted, numbers/true/false/null verbatim.
// Nested objects and arrays are skipped. Throws OpError(INVALID_ARGUMENT) on malformed JSON.
std::map<std::string, std::string> parse_flat_json(const std::string& text);

std::optional<bool> json_bool(const std::map<std::string, std::string>& obj, const std::string& key);
std::optional<long long> json_int(const std::map<std::string, std::string>& obj, const std::string& key);

}  // namespace loom::cuda
