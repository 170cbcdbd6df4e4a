// Where tests find things: the source tree, the build's plugins and ../shared/testdata.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <unistd.h>

namespace loom::test {

inline std::filesystem::path source_dir() { return LOOM_SOURCE_DIR; }
inline std::filesystem::path plugin_build_dir() { return LOOM_PLUGIN_BUILD_DIR; }
inline std::filesystem::path loom_binary() { return LOOM_BIN; }
inline std::filesystem::path test_plugin_dir() { return LOOM_TEST_PLUGIN_DIR; }

// ../shared/testdata beside the checkout, or nullopt (tests then SKIP with a message).
inline std::optional<std::filesystem::path> shared_testdata() {
  auto dir = source_dir().parent_path() / "shared" / "testdata";
  if (std::filesystem::is_directory(dir)) return dir;
  return std::nullopt;
}

// A fresh, empty scratch folder for one test. CTest runs each test case as its own process, several
// at once, so the folder is per process: two processes never rewrite each other's files.
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::path(LOOM_BINARY_DIR) / "test-scratch" / (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace loom::test
