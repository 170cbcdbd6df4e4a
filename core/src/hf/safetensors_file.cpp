#include "hf/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace loom::hf {

namespace {

// Bytes per element of every dtype the format defines (its Rust crate's Dtype).
int64_t element_bytes(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

int safetensors_dtype(std::string_view dtype) {
  if (dtype == "F32") return LOOM_DTYPE_F32;
  if (dtype == "F16") return LOOM_DTYPE_F16;
  if (dtype == "BF16") return LOOM_DTYPE_BF16;
  return -1;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.label_ = path.string();
  file.mapping_ = gguf::MappedFile(path);
  file.parse(file.mapping_.bytes());
  return file;
}

SafetensorsFile SafetensorsFile::from_memory(std::span<const uint8_t> bytes, std::string label) {
  SafetensorsFile file;
  file.label_ = std::move(label);
  file.parse(bytes);
  return file;
}

const SafeTensor* SafetensorsFile::find(std::string_view name) const {
  for (const SafeTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void SafetensorsFile::parse(std::span<const uint8_t> bytes) {
  auto fail = [&](const std::string& what) -> Error { return Error(label_ + ": " + what); };
  if (bytes.size() < 8) throw fail("truncated: " + std::to_string(bytes.size()) + " bytes, less than the 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);  // little-endian, as the format and x86/ARM are
  if (header_len < 2 || header_len > bytes.size() - 8)
    throw fail("the header claims " + std::to_string(header_len) + " bytes, but the file holds " + std::to_string(bytes.size() - 8) + " after its length");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(header_len));
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number it cannot hold
    throw fail(std::string("the header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw fail("the header is not a JSON object");
  const std::span<const uint8_t> data = bytes.subspan(8 + header_len);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() || !entry.contains("shape") || !entry["shape"].is_array() ||
        !entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      throw fail(where + " needs dtype, shape and data_offsets [begin, end]");
    SafeTensor t;
    t.name = name;
    t.dtype = entry["dtype"].get<std::string>();
    const int64_t elem = element_bytes(t.dtype);
    if (elem == 0) throw fail(where + " has dtype '" + t.dtype + "', which the format does not define");
    uint64_t count = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) throw fail(where + " has a shape entry that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t(1) << 40) || (v != 0 && count > (uint64_t(1) << 50) / v)) throw fail(where + " has a shape too large");
      t.shape.push_back(int64_t(v));
      count *= v;
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) throw fail(where + " has data_offsets that are not non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data.size())
      throw fail(where + " spans bytes " + std::to_string(begin) + ".." + std::to_string(end) + " of a data section of " + std::to_string(data.size()));
    if (end - begin != count * uint64_t(elem))
      throw fail(where + " holds " + std::to_string(end - begin) + " bytes; its shape and dtype need " + std::to_string(count * uint64_t(elem)));
    t.data = data.subspan(begin, end - begin);
    ranges.emplace_back(begin, end);
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); i++)
    if (ranges[i].first < ranges[i - 1].second) throw fail("two tensors overlap at byte " + std::to_string(ranges[i].first) + " of the data section");
}

}  // namespace loom::hf
