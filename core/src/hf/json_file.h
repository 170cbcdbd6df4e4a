// A JSON file of a Hugging Face folder, parsed: loom::Error naming the path when it cannot be opened or
// is not JSON (a number too large to hold included).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace loom::hf {

nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace loom::hf
