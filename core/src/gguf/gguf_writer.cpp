#include "gguf/gguf_writer.h"

#include <bit>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"

namespace loom::gguf {

namespace {

constexpr uint32_t kVersion = 3;

// resize + memcpy rather than vector::insert: g++ 12 at -O3 reports a false -Wstringop-overflow on
// the small inserts.
void append(std::vector<uint8_t>& out, const void* data, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, data, n);
}

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  static_assert(std::endian::native == std::endian::little, "GgufWriter writes little-endian files");
  append(out, &value, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  append(out, s.data(), s.size());
}

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

template <typename T>
std::vector<uint8_t> encode_array(ValueType element_type, const std::vector<T>& values) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(element_type));
  put<uint64_t>(out, values.size());
  for (const T& v : values) put<T>(out, v);
  return out;
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment) || alignment > (uint64_t{1} << 30)) {
    throw Error("GGUF writer: alignment " + std::to_string(alignment) + " is not a power of two up to 2^30");
  }
  if (alignment != 32) set_uint32("general.alignment", static_cast<uint32_t>(alignment));
}

bool GgufWriter::has_key(std::string_view key) const {
  for (const Entry& entry : entries_) {
    if (entry.key == key) return true;
  }
  return false;
}

void GgufWriter::set_raw(std::string key, uint32_t value_type, std::vector<uint8_t> encoded_value) {
  if (key.empty()) throw Error("GGUF writer: empty metadata key");
  if (value_type > static_cast<uint32_t>(ValueType::float64)) {
    throw Error("GGUF writer: metadata '" + key + "': unknown value type " + std::to_string(value_type));
  }
  if (has_key(key)) throw Error("GGUF writer: duplicate metadata key '" + key + "'");
  entries_.push_back({std::move(key), value_type, std::move(encoded_value)});
}

void GgufWriter::set_string(std::string key, std::string value) {
  std::vector<uint8_t> encoded;
  put_string(encoded, value);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::string), std::move(encoded));
}

void GgufWriter::set_uint32(std::string key, uint32_t value) {
  std::vector<uint8_t> encoded;
  put(encoded, value);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::uint32), std::move(encoded));
}

void GgufWriter::set_int32(std::string key, int32_t value) {
  std::vector<uint8_t> encoded;
  put(encoded, value);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::int32), std::move(encoded));
}

void GgufWriter::set_uint64(std::string key, uint64_t value) {
  std::vector<uint8_t> encoded;
  put(encoded, value);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::uint64), std::move(encoded));
}

void GgufWriter::set_float32(std::string key, float value) {
  std::vector<uint8_t> encoded;
  put(encoded, value);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::float32), std::move(encoded));
}

void GgufWriter::set_bool(std::string key, bool value) {
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::boolean), {static_cast<uint8_t>(value ? 1 : 0)});
}

void GgufWriter::set_string_array(std::string key, std::vector<std::string> values) {
  std::vector<uint8_t> encoded;
  put<uint32_t>(encoded, static_cast<uint32_t>(ValueType::string));
  put<uint64_t>(encoded, values.size());
  for (const std::string& v : values) put_string(encoded, v);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::array), std::move(encoded));
}

void GgufWriter::set_float32_array(std::string key, std::vector<float> values) {
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::array), encode_array(ValueType::float32, values));
}

void GgufWriter::set_int32_array(std::string key, std::vector<int32_t> values) {
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::array), encode_array(ValueType::int32, values));
}

void GgufWriter::set_uint8_array(std::string key, std::vector<uint8_t> values) {
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::array), encode_array(ValueType::uint8, values));
}

void GgufWriter::set_bool_array(std::string key, std::vector<bool> values) {
  std::vector<uint8_t> bytes;
  for (bool v : values) bytes.push_back(v ? 1 : 0);
  set_raw(std::move(key), static_cast<uint32_t>(ValueType::array), encode_array(ValueType::boolean, bytes));
}

uint64_t GgufWriter::checked_bytes(const std::string& name, loom_dtype type, const std::vector<int64_t>& dims) const {
  const std::string where = "GGUF writer: tensor '" + name + "'";
  if (dtype_traits(type) == nullptr) throw Error(where + ": unknown type id " + std::to_string(type));
  if (dims.empty() || dims.size() > 4) throw Error(where + ": " + std::to_string(dims.size()) + " dims (expected 1..4)");
  int64_t n_rows = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] <= 0) throw Error(where + ": dim " + std::to_string(d) + " is " + std::to_string(dims[d]));
    if (d > 0) n_rows *= dims[d];
  }
  uint64_t row_bytes = 0;
  try {
    row_bytes = dtype_row_bytes(type, dims[0]);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  for (const Tensor& tensor : tensors_) {
    if (tensor.name == name) throw Error("GGUF writer: duplicate tensor name '" + name + "'");
  }
  return row_bytes * static_cast<uint64_t>(n_rows);
}

void GgufWriter::add_tensor(std::string name, loom_dtype type, std::vector<int64_t> dims, std::vector<uint8_t> data) {
  const uint64_t n_bytes = checked_bytes(name, type, dims);
  if (data.size() != n_bytes) {
    throw Error("GGUF writer: tensor '" + name + "': " + std::to_string(data.size()) + " data bytes (expected " + std::to_string(n_bytes) + ")");
  }
  tensors_.push_back({std::move(name), type, std::move(dims), std::move(data), n_bytes, false});
}

void GgufWriter::add_tensor_info(std::string name, loom_dtype type, std::vector<int64_t> dims) {
  const uint64_t n_bytes = checked_bytes(name, type, dims);
  tensors_.push_back({std::move(name), type, std::move(dims), {}, n_bytes, true});
}

void GgufWriter::append_header(std::vector<uint8_t>& out) const {
  append(out, "GGUF", 4);
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, entries_.size());
  for (const Entry& entry : entries_) {
    put_string(out, entry.key);
    put<uint32_t>(out, entry.type);
    append(out, entry.value.data(), entry.value.size());
  }
  uint64_t offset = 0;
  for (const Tensor& tensor : tensors_) {
    put_string(out, tensor.name);
    put<uint32_t>(out, static_cast<uint32_t>(tensor.dims.size()));
    for (int64_t dim : tensor.dims) put<uint64_t>(out, static_cast<uint64_t>(dim));
    put<uint32_t>(out, static_cast<uint32_t>(tensor.type));
    put<uint64_t>(out, offset);
    offset += (tensor.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  pad_to(out, alignment_);
}

std::vector<uint8_t> GgufWriter::to_header_bytes() const {
  std::vector<uint8_t> out;
  append_header(out);
  return out;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  for (const Tensor& tensor : tensors_)
    if (tensor.info_only) throw Error("GGUF writer: tensor '" + tensor.name + "' has no data (added with add_tensor_info)");
  std::vector<uint8_t> out;
  append_header(out);
  for (const Tensor& tensor : tensors_) {
    append(out, tensor.data.data(), tensor.data.size());
    pad_to(out, alignment_);
  }
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::vector<uint8_t> bytes = to_bytes();
  // Write beside the target and rename, so a failed write never leaves a half file under the real name.
  std::filesystem::path tmp = path;
  tmp += ".partial";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    if (!file) throw Error(path.string() + ": cannot open for writing");
    file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    file.close();
    if (!file) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw Error(path.string() + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": cannot rename from " + tmp.string() + ": " + ec.message());
}

}  // namespace loom::gguf
