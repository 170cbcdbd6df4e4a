// Shared helpers of the [gguf] tests: patching little-endian fields of a writer's output.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace loom::test {

using Bytes = std::vector<uint8_t>;

// Offset of the first occurrence of `text` in `bytes` (fails the test when absent).
inline size_t find_text(const Bytes& bytes, std::string_view text) {
  for (size_t i = 0; i + text.size() <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, text.data(), text.size()) == 0) return i;
  }
  FAIL("'" << text << "' not found in the file bytes");
  return 0;
}

template <typename T>
void poke(Bytes& bytes, size_t at, T value) {
  REQUIRE(at + sizeof(T) <= bytes.size());
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

template <typename T>
T peek(const Bytes& bytes, size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

// The loom::Error message parsing `bytes` gives, or "" when it parses.
inline std::string parse_error(const Bytes& bytes) {
  try {
    gguf::GgufFile::from_memory(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace loom::test
