// Typed access to GGUF metadata values. The bytes were validated by the parser; these functions
// only decode and check that the stored type suits the caller.
#include <cstdio>
#include <limits>

#include "common/error.h"
#include "gguf/gguf_file_impl.h"

namespace loom::gguf {

namespace {

constexpr size_t kMaxShownStringBytes = 160;

struct Number {
  enum Kind { unsigned_int, signed_int, floating, not_numeric } kind = not_numeric;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
};

Number decode_number(ValueType type, const uint8_t* p) {
  Number n;
  auto set_unsigned = [&](uint64_t v) { n.kind = Number::unsigned_int; n.u = v; };
  auto set_signed = [&](int64_t v) { n.kind = Number::signed_int; n.i = v; };
  switch (type) {
    case ValueType::uint8: set_unsigned(p[0]); break;
    case ValueType::uint16: set_unsigned(load_le<uint16_t>(p)); break;
    case ValueType::uint32: set_unsigned(load_le<uint32_t>(p)); break;
    case ValueType::uint64: set_unsigned(load_le<uint64_t>(p)); break;
    case ValueType::int8: set_signed(static_cast<int8_t>(p[0])); break;
    case ValueType::int16: set_signed(load_le<int16_t>(p)); break;
    case ValueType::int32: set_signed(load_le<int32_t>(p)); break;
    case ValueType::int64: set_signed(load_le<int64_t>(p)); break;
    case ValueType::float32: n.kind = Number::floating; n.f = load_le<float>(p); break;
    case ValueType::float64: n.kind = Number::floating; n.f = load_le<double>(p); break;
    default: break;
  }
  return n;
}

// Walks the strings of an encoded string array (u64 length + bytes each, validated by the parser).
template <typename Fn>
void for_each_string(const MetadataValue& value, Fn&& fn) {
  const uint8_t* p = value.raw.data();
  for (uint64_t i = 0; i < value.array_size; ++i) {
    const auto length = load_le<uint64_t>(p);
    fn(std::string_view(reinterpret_cast<const char*>(p + 8), length));
    p += 8 + length;
  }
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  const size_t shown = std::min(s.size(), kMaxShownStringBytes);
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (shown < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string number_to_string(ValueType type, const uint8_t* p) {
  if (type == ValueType::boolean) return p[0] ? "true" : "false";
  const Number n = decode_number(type, p);
  switch (n.kind) {
    case Number::unsigned_int: return std::to_string(n.u);
    case Number::signed_int: return std::to_string(n.i);
    case Number::floating: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", n.f);
      return buf;
    }
    case Number::not_numeric: break;
  }
  return "?";
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::uint8: return "uint8";
    case ValueType::int8: return "int8";
    case ValueType::uint16: return "uint16";
    case ValueType::int16: return "int16";
    case ValueType::uint32: return "uint32";
    case ValueType::int32: return "int32";
    case ValueType::float32: return "float32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::uint64: return "uint64";
    case ValueType::int64: return "int64";
    case ValueType::float64: return "float64";
  }
  return "unknown";
}

namespace {

[[noreturn]] void type_error(const std::string& label, std::string_view key, const MetadataValue& value,
                             const char* expected) {
  std::string actual(value_type_name(value.type));
  if (value.type == ValueType::array) actual += " of " + std::string(value_type_name(value.array_type));
  throw Error(label + ": metadata '" + std::string(key) + "' has type " + actual + " (expected " + expected + ")");
}

}  // namespace

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != ValueType::string) type_error(label(), key, *value, "string");
  return std::string(reinterpret_cast<const char*>(value->raw.data() + 8), value->raw.size() - 8);
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  const Number n = decode_number(value->type, value->raw.data());
  if (n.kind == Number::unsigned_int) return n.u;
  if (n.kind != Number::signed_int) type_error(label(), key, *value, "an integer");
  if (n.i < 0) {
    throw Error(label() + ": metadata '" + std::string(key) + "' is " + std::to_string(n.i) +
                " (expected a non-negative integer)");
  }
  return static_cast<uint64_t>(n.i);
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  const Number n = decode_number(value->type, value->raw.data());
  if (n.kind == Number::signed_int) return n.i;
  if (n.kind != Number::unsigned_int) type_error(label(), key, *value, "an integer");
  if (n.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(label() + ": metadata '" + std::string(key) + "' is " + std::to_string(n.u) + " (too large for int64)");
  }
  return static_cast<int64_t>(n.u);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  const Number n = decode_number(value->type, value->raw.data());
  switch (n.kind) {
    case Number::floating: return n.f;
    case Number::unsigned_int: return static_cast<double>(n.u);
    case Number::signed_int: return static_cast<double>(n.i);
    case Number::not_numeric: break;
  }
  type_error(label(), key, *value, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != ValueType::boolean) type_error(label(), key, *value, "bool");
  return value->raw[0] != 0;
}

std::vector<bool> GgufFile::get_bool_array(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return {};
  if (value->type != ValueType::array || value->array_type != ValueType::boolean) {
    type_error(label(), key, *value, "array of bool");
  }
  std::vector<bool> out;
  out.reserve(value->array_size);
  for (uint64_t i = 0; i < value->array_size; ++i) out.push_back(value->raw[i] != 0);
  return out;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return {};
  if (value->type != ValueType::array || value->array_type != ValueType::string) {
    type_error(label(), key, *value, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(value->array_size);
  for_each_string(*value, [&](std::string_view s) { out.emplace_back(s); });
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return {};
  const uint64_t size = value->type == ValueType::array ? fixed_value_size(value->array_type) : 0;
  if (size == 0 || value->array_type == ValueType::boolean) type_error(label(), key, *value, "array of numbers");
  std::vector<float> out;
  out.reserve(value->array_size);
  for (uint64_t i = 0; i < value->array_size; ++i) {
    const Number n = decode_number(value->array_type, value->raw.data() + i * size);
    out.push_back(n.kind == Number::floating      ? static_cast<float>(n.f)
                  : n.kind == Number::signed_int ? static_cast<float>(n.i)
                                                 : static_cast<float>(n.u));
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const MetadataValue* value = find(key);
  if (value == nullptr) return {};
  const uint64_t size = value->type == ValueType::array ? fixed_value_size(value->array_type) : 0;
  const bool is_integer = size != 0 && value->array_type != ValueType::boolean &&
                          value->array_type != ValueType::float32 && value->array_type != ValueType::float64;
  if (!is_integer) type_error(label(), key, *value, "array of integers");
  std::vector<int64_t> out;
  out.reserve(value->array_size);
  for (uint64_t i = 0; i < value->array_size; ++i) {
    const Number n = decode_number(value->array_type, value->raw.data() + i * size);
    if (n.kind == Number::unsigned_int && n.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error(label() + ": metadata '" + std::string(key) + "[" + std::to_string(i) + "]' is " +
                  std::to_string(n.u) + " (too large for int64)");
    }
    out.push_back(n.kind == Number::signed_int ? n.i : static_cast<int64_t>(n.u));
  }
  return out;
}

std::string GgufFile::value_to_string(const MetadataValue& value, size_t max_array_items) const {
  if (value.type == ValueType::string) {
    return quote(std::string_view(reinterpret_cast<const char*>(value.raw.data() + 8), value.raw.size() - 8));
  }
  if (value.type != ValueType::array) return number_to_string(value.type, value.raw.data());
  std::string out = std::string(value_type_name(value.array_type)) + "[" + std::to_string(value.array_size) + "] [";
  size_t shown = 0;
  auto add = [&](const std::string& item) {
    if (shown > 0) out += ", ";
    out += item;
    ++shown;
  };
  if (value.array_type == ValueType::string) {
    // Stop walking once enough items are shown: vocabularies hold hundreds of thousands of strings.
    const uint8_t* p = value.raw.data();
    for (uint64_t i = 0; i < value.array_size && shown < max_array_items; ++i) {
      const auto length = load_le<uint64_t>(p);
      add(quote(std::string_view(reinterpret_cast<const char*>(p + 8), length)));
      p += 8 + length;
    }
  } else {
    const uint64_t size = fixed_value_size(value.array_type);
    for (uint64_t i = 0; i < value.array_size && shown < max_array_items; ++i) {
      add(number_to_string(value.array_type, value.raw.data() + i * size));
    }
  }
  if (shown < value.array_size) out += shown > 0 ? ", ..." : "...";
  out += "]";
  return out;
}

}  // namespace loom::gguf
