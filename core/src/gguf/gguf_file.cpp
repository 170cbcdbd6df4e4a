// GGUF parsing and validation. Layout (all little-endian):
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
//   n_kv x (string key, u32 value type, value),
//   n_tensors x (string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset),
//   padding to `general.alignment` (default 32), data section.
// A string is a u64 length then that many bytes; an array is u32 element type, u64 count, elements.
#include <algorithm>
#include <bit>
#include <limits>

#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file_impl.h"

namespace loom::gguf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Smallest possible encodings, used to reject counts that cannot fit in the remaining bytes.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;          // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, n_dims, 1 dim, type, offset

std::string str(uint64_t v) { return std::to_string(v); }

// Bounds-checked cursor over the file. Every read names what it was reading, so a truncated file
// says where it ends.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(label_ + ": " + what); }

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  std::span<const uint8_t> take(uint64_t n, const std::string& what) {
    if (n > remaining()) {
      fail("truncated: " + what + " needs " + str(n) + " bytes at offset " + str(pos_) + " but only " +
           str(remaining()) + " remain");
    }
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  uint32_t u32(const std::string& what) { return load_le<uint32_t>(take(4, what).data()); }
  uint64_t u64(const std::string& what) { return load_le<uint64_t>(take(8, what).data()); }

  std::string_view string(const std::string& what) {
    const uint64_t at = pos_;
    const uint64_t length = u64(what + " length");
    if (length > remaining()) {
      fail(what + " at offset " + str(at) + " has length " + str(length) + " but only " + str(remaining()) +
           " bytes remain");
    }
    auto chars = take(length, what);
    return {reinterpret_cast<const char*>(chars.data()), chars.size()};
  }

  std::span<const uint8_t> since(uint64_t start) const { return bytes_.subspan(start, pos_ - start); }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& label_;
  uint64_t pos_ = 0;
};

void check_scalar(Reader& reader, ValueType type, std::span<const uint8_t> raw, const std::string& where) {
  if (type == ValueType::boolean && raw[0] > 1) {
    reader.fail(where + ": boolean value " + str(raw[0]) + " (expected 0 or 1)");
  }
}

MetadataValue read_value(Reader& reader, uint32_t raw_type, const std::string& where) {
  if (!is_known_value_type(raw_type)) {
    reader.fail(where + ": unknown value type " + str(raw_type) + " (expected 0..12)");
  }
  MetadataValue value;
  value.type = static_cast<ValueType>(raw_type);
  const uint64_t start = reader.pos();
  if (value.type == ValueType::string) {
    reader.string(where);
    value.raw = reader.since(start);
    return value;
  }
  if (value.type != ValueType::array) {
    value.raw = reader.take(fixed_value_size(value.type), where);
    check_scalar(reader, value.type, value.raw, where);
    return value;
  }
  const uint32_t element_raw = reader.u32(where + " array element type");
  if (!is_known_value_type(element_raw)) {
    reader.fail(where + ": unknown array element type " + str(element_raw) + " (expected 0..12)");
  }
  value.array_type = static_cast<ValueType>(element_raw);
  if (value.array_type == ValueType::array) reader.fail(where + ": nested arrays are not supported");
  value.array_size = reader.u64(where + " array size");
  const uint64_t elements_start = reader.pos();
  const uint64_t element_size = fixed_value_size(value.array_type);
  const uint64_t min_element = element_size == 0 ? 8 : element_size;  // a string is at least its length
  if (value.array_size > reader.remaining() / min_element) {
    reader.fail(where + ": array of " + str(value.array_size) + " " +
                std::string(value_type_name(value.array_type)) + " cannot fit in the " + str(reader.remaining()) +
                " remaining bytes");
  }
  if (element_size != 0) {
    value.raw = reader.take(value.array_size * element_size, where);
    if (value.array_type == ValueType::boolean) {
      for (uint64_t i = 0; i < value.array_size; ++i) {
        check_scalar(reader, ValueType::boolean, value.raw.subspan(i, 1), where + "[" + str(i) + "]");
      }
    }
  } else {
    for (uint64_t i = 0; i < value.array_size; ++i) reader.string(where + "[" + str(i) + "]");
    value.raw = reader.since(elements_start);
  }
  return value;
}

uint64_t read_alignment(const GgufState& impl, Reader& reader) {
  auto it = impl.metadata_index.find("general.alignment");
  if (it == impl.metadata_index.end()) return kDefaultAlignment;
  const MetadataValue& value = impl.metadata[it->second].value;
  uint64_t alignment = 0;
  switch (value.type) {
    case ValueType::uint8: alignment = value.raw[0]; break;
    case ValueType::uint16: alignment = load_le<uint16_t>(value.raw.data()); break;
    case ValueType::uint32: alignment = load_le<uint32_t>(value.raw.data()); break;
    case ValueType::uint64: alignment = load_le<uint64_t>(value.raw.data()); break;
    default:
      reader.fail("general.alignment has type " + std::string(value_type_name(value.type)) +
                  " (expected an unsigned integer)");
  }
  if (alignment == 0 || !std::has_single_bit(alignment) || alignment > (uint64_t{1} << 30)) {
    reader.fail("general.alignment is " + str(alignment) + " (expected a power of two up to 2^30)");
  }
  return alignment;
}

TensorInfo read_tensor_info(Reader& reader, uint64_t index) {
  const std::string where = "tensor " + str(index);
  TensorInfo tensor;
  tensor.name = std::string(reader.string(where + " name"));
  const std::string named = where + " '" + tensor.name + "'";
  const uint32_t n_dims = reader.u32(named + " n_dims");
  if (n_dims == 0 || n_dims > kMaxDims) {
    reader.fail(named + ": n_dims " + str(n_dims) + " (expected 1.." + str(kMaxDims) + ")");
  }
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t dim = reader.u64(named + " dim " + str(d));
    if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      reader.fail(named + ": dim " + str(d) + " is " + std::to_string(static_cast<int64_t>(dim)) +
                  " (expected a positive size)");
    }
    if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim) {
      reader.fail(named + ": element count overflows int64 at dim " + str(d) + " (" + str(dim) + ")");
    }
    n_elements *= dim;
    tensor.dims.push_back(static_cast<int64_t>(dim));
  }
  tensor.n_elements = static_cast<int64_t>(n_elements);
  const uint32_t raw_type = reader.u32(named + " type");
  const DtypeTraits* traits = dtype_traits(static_cast<loom_dtype>(raw_type));
  if (raw_type > static_cast<uint32_t>(std::numeric_limits<loom_dtype>::max()) || traits == nullptr) {
    reader.fail(named + ": unknown tensor type " + str(raw_type));
  }
  tensor.type = static_cast<loom_dtype>(raw_type);
  if (tensor.dims[0] % traits->block_elems != 0) {
    reader.fail(named + ": row size " + str(static_cast<uint64_t>(tensor.dims[0])) + " is not a multiple of the " +
                std::string(traits->name) + " block size " + str(static_cast<uint64_t>(traits->block_elems)));
  }
  const uint64_t row_bytes = dtype_row_bytes(tensor.type, tensor.dims[0]);
  const uint64_t n_rows = n_elements / static_cast<uint64_t>(tensor.dims[0]);
  if (row_bytes != 0 && n_rows > std::numeric_limits<uint64_t>::max() / row_bytes) {
    reader.fail(named + ": byte size overflows (" + str(n_rows) + " rows of " + str(row_bytes) + " bytes)");
  }
  tensor.n_bytes = row_bytes * n_rows;
  tensor.offset = reader.u64(named + " offset");
  return tensor;
}

void check_tensor_placement(GgufState& impl, Reader& reader) {
  const uint64_t file_size = impl.bytes.size();
  const uint64_t data_size = impl.data_offset <= file_size ? file_size - impl.data_offset : 0;
  for (const TensorInfo& tensor : impl.tensors) {
    const std::string named = "tensor '" + tensor.name + "'";
    if (tensor.offset % impl.alignment != 0) {
      reader.fail(named + ": offset " + str(tensor.offset) + " is not a multiple of the alignment " +
                  str(impl.alignment));
    }
    if (tensor.offset > data_size || tensor.n_bytes > data_size - tensor.offset) {
      reader.fail(named + ": data [" + str(tensor.offset) + ", +" + str(tensor.n_bytes) +
                  ") lies beyond the end of the file (data section is " + str(data_size) + " bytes from offset " +
                  str(impl.data_offset) + ")");
    }
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& tensor : impl.tensors) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& next = *by_offset[i];
    if (prev.offset + prev.n_bytes > next.offset) {
      reader.fail("tensors '" + prev.name + "' [" + str(prev.offset) + ", " + str(prev.offset + prev.n_bytes) +
                  ") and '" + next.name + "' [" + str(next.offset) + ", " + str(next.offset + next.n_bytes) +
                  ") overlap");
    }
  }
}

void parse(GgufState& impl) {
  Reader reader(impl.bytes, impl.label);
  auto magic = reader.take(4, "magic");
  if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
    std::string shown;
    for (uint8_t c : magic) shown += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    reader.fail("bad magic '" + shown + "' (expected 'GGUF'; not a GGUF file)");
  }
  impl.version = reader.u32("version");
  if (impl.version != 2 && impl.version != 3) {
    const uint32_t swapped = __builtin_bswap32(impl.version);
    std::string hint = impl.version == 1 ? " (GGUF v1 is obsolete; convert the file with a newer llama.cpp)" : "";
    if (swapped == 2 || swapped == 3) hint = " (a big-endian GGUF file; only little-endian files are supported)";
    reader.fail("unknown GGUF version " + str(impl.version) + " (expected 2 or 3)" + hint);
  }
  const uint64_t n_tensors = reader.u64("tensor count");
  const uint64_t n_kv = reader.u64("metadata count");
  const uint64_t rest = reader.remaining();
  if (n_kv > rest / kMinKvBytes || n_tensors > rest / kMinTensorInfoBytes ||
      n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > rest) {
    reader.fail("header claims " + str(n_kv) + " metadata entries and " + str(n_tensors) +
                " tensors, which cannot fit in the " + str(rest) + " remaining bytes");
  }
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string where = "metadata entry " + str(i);
    std::string key(reader.string(where + " key"));
    if (key.empty()) reader.fail(where + ": empty key");
    const std::string named = "metadata '" + key + "'";
    const uint32_t raw_type = reader.u32(named + " type");
    MetadataValue value = read_value(reader, raw_type, named);
    if (impl.metadata_index.count(key) != 0) reader.fail("duplicate metadata key '" + key + "'");
    impl.metadata_index.emplace(key, impl.metadata.size());
    impl.metadata.push_back({std::move(key), value});
  }
  impl.alignment = read_alignment(impl, reader);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo tensor = read_tensor_info(reader, i);
    if (impl.tensor_index.count(tensor.name) != 0) reader.fail("duplicate tensor name '" + tensor.name + "'");
    impl.tensor_index.emplace(tensor.name, impl.tensors.size());
    impl.tensors.push_back(std::move(tensor));
  }
  // pos <= file size, so rounding up cannot overflow.
  impl.data_offset = (reader.pos() + impl.alignment - 1) / impl.alignment * impl.alignment;
  if (impl.external.empty() && impl.external_owner == nullptr) {
    check_tensor_placement(impl, reader);
    return;
  }
  // The tensors' bytes live elsewhere: one span per tensor, each exactly its size.
  if (impl.external.size() != impl.tensors.size())
    reader.fail(str(impl.external.size()) + " tensor data spans for " + str(impl.tensors.size()) + " tensors");
  for (size_t i = 0; i < impl.tensors.size(); ++i)
    if (impl.external[i].size() != impl.tensors[i].n_bytes)
      reader.fail("tensor '" + impl.tensors[i].name + "': " + str(impl.external[i].size()) + " data bytes, its shape and type need " +
                  str(impl.tensors[i].n_bytes));
}

}  // namespace

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->label = path.string();
  impl->mapping = MappedFile(path);
  impl->bytes = impl->mapping.bytes();
  parse(*impl);
  return GgufFile(std::move(impl));
}

GgufFile GgufFile::from_memory(std::span<const uint8_t> bytes, std::string label) {
  auto impl = std::make_unique<Impl>();
  impl->label = std::move(label);
  impl->bytes = bytes;
  parse(*impl);
  return GgufFile(std::move(impl));
}

GgufFile GgufFile::with_external_data(std::vector<uint8_t> header, std::vector<std::span<const uint8_t>> tensor_data,
                                      std::shared_ptr<const void> owner, std::string label) {
  auto impl = std::make_unique<Impl>();
  impl->label = std::move(label);
  impl->owned_header = std::move(header);
  impl->bytes = impl->owned_header;
  impl->external = std::move(tensor_data);
  impl->external_owner = owner != nullptr ? std::move(owner) : std::make_shared<int>(0);
  parse(*impl);
  return GgufFile(std::move(impl));
}

void GgufFile::release_tensor_pages() const { impl_->mapping.drop_pages(data_offset(), file_size() - data_offset()); }

const std::string& GgufFile::label() const { return impl_->label; }
uint32_t GgufFile::version() const { return impl_->version; }
uint64_t GgufFile::alignment() const { return impl_->alignment; }
uint64_t GgufFile::file_size() const { return impl_->bytes.size(); }
uint64_t GgufFile::data_offset() const { return impl_->data_offset; }
const std::vector<MetadataEntry>& GgufFile::metadata() const { return impl_->metadata; }
const std::vector<TensorInfo>& GgufFile::tensors() const { return impl_->tensors; }

const MetadataValue* GgufFile::find(std::string_view key) const {
  auto it = impl_->metadata_index.find(key);
  return it == impl_->metadata_index.end() ? nullptr : &impl_->metadata[it->second].value;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const TensorInfo& tensor) const {
  if (impl_->external_owner != nullptr) {  // only this file's own TensorInfo: its place in the list
    const auto& all = impl_->tensors;
    if (&tensor < all.data() || &tensor >= all.data() + all.size()) throw Error(impl_->label + ": tensor '" + tensor.name + "' is not one of this model's");
    return impl_->external[size_t(&tensor - all.data())];
  }
  const uint64_t size = impl_->bytes.size();
  // Placement was validated for this file's tensors; re-check so a TensorInfo from elsewhere can't read OOB.
  if (impl_->data_offset > size || tensor.offset > size - impl_->data_offset ||
      tensor.n_bytes > size - impl_->data_offset - tensor.offset) {
    throw Error(impl_->label + ": tensor '" + tensor.name + "' lies outside the file");
  }
  return impl_->bytes.subspan(impl_->data_offset + tensor.offset, tensor.n_bytes);
}

}  // namespace loom::gguf
