// Writes the seed corpus of safetensors_fuzz: small valid files in the format's layout (header length,
// JSON header, data), with metadata, several dtypes, a scalar and an empty tensor.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

void write(const std::filesystem::path& path, const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; i++) out.push_back(uint8_t(i * 37));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: safetensors_fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  write(dir / "one.safetensors", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 24);
  write(dir / "many.safetensors",
        R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]},)"
        R"("c":{"dtype":"I64","shape":[1],"data_offsets":[16,24]},"s":{"dtype":"F32","shape":[],"data_offsets":[24,28]},"e":{"dtype":"U8","shape":[0],"data_offsets":[28,28]}})",
        28);
  write(dir / "f8.safetensors", R"({"q":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]},"scale":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12);
  return 0;
}
