// The vision golden files (tests/golden/vision/*.json, scripts/make_vision_golden.py): llama.cpp mtmd's
// pixels, embedding rows and logits for a synthetic text model + mmproj pair that the tests regenerate
// bit for bit with `loom gguf synth` and `loom gguf synth-mmproj`.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace loom::test {

struct VisionGolden {
  nlohmann::json json;
  std::filesystem::path text_model, mmproj, image;
};

inline std::string fnv1a64_hex(const void* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

inline std::string file_fnv1a64(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  return fnv1a64_hex(bytes.data(), bytes.size());
}

// Loads tests/golden/vision/<name>.json and writes its two models into a scratch folder; the hashes
// must match the recorded ones (else the test would compare against another file's outputs).
inline VisionGolden load_vision_golden(const std::string& name) {
  VisionGolden g;
  std::ifstream in(source_dir() / "tests" / "golden" / "vision" / (name + ".json"));
  g.json = nlohmann::json::parse(in);
  const auto dir = scratch_dir("vision-" + name);
  g.text_model = dir / "text.gguf";
  g.mmproj = dir / "mmproj.gguf";
  g.image = source_dir() / g.json.at("image").get<std::string>();
  auto run = [&](const char* command, const nlohmann::json& args, const std::filesystem::path& out) {
    std::string line = loom_binary().string() + " gguf " + command;
    for (const auto& a : args) line += " '" + a.get<std::string>() + "'";
    line += " -o '" + out.string() + "' > /dev/null";
    if (std::system(line.c_str()) != 0) throw std::runtime_error("failed: " + line);
  };
  run("synth", g.json.at("text_model").at("args"), g.text_model);
  run("synth-mmproj", g.json.at("mmproj").at("args"), g.mmproj);
  if (file_fnv1a64(g.text_model) != g.json.at("text_model").at("fnv1a64") || file_fnv1a64(g.mmproj) != g.json.at("mmproj").at("fnv1a64"))
    throw std::runtime_error(name + ": the regenerated synthetic files differ from the ones llama.cpp saw (hash mismatch)");
  return g;
}

}  // namespace loom::test
