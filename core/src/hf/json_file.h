// A JSON file of a Hugging Face folder, parsed: loom::Error naming the path when it cannot be opened or
// is not JSON (a number too large to hold included).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace loom::hf {

nlohmann::json read_json_file(const std::filesystem::path& path);

// config.json's key as a non-negative integer; loom::Error naming the file and key otherwise.
uint64_t config_uint(const nlohmann::json& config, const std::filesystem::path& dir, const char* key);

}  // namespace loom::hf
