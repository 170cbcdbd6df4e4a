#include "hf/json_file.h"

#include <fstream>

#include "common/error.h"

namespace loom::hf {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot be opened");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number it cannot hold
    throw Error(path.string() + ": not JSON: " + e.what());
  }
}

uint64_t config_uint(const nlohmann::json& config, const std::filesystem::path& dir, const char* key) {
  if (!config.contains(key) || !config[key].is_number_unsigned())
    throw Error((dir / "config.json").string() + ": '" + key + "' is missing or not a non-negative integer");
  return config[key].get<uint64_t>();
}

}  // namespace loom::hf
