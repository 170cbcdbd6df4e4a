#include "chat/jinja_value.h"

#include <cmath>
#include <cstdio>

namespace loom::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}
Value::Value(bool b) : kind_(Kind::boolean), bool_(b) {}
Value::Value(int64_t i) : kind_(Kind::integer), int_(i) {}
Value::Value(double f) : kind_(Kind::floating), float_(f) {}
Value::Value(std::string s) : kind_(Kind::string), string_(std::move(s)) {}
Value::Value(Array a) : kind_(Kind::array), array_(std::make_shared<Array>(std::move(a))) {}
Value::Value(Object o) : kind_(Kind::object), object_(std::make_shared<Object>(std::move(o))) {}
Value Value::function(Function fn) {
  Value v;
  v.kind_ = Kind::function;
  v.function_ = std::make_shared<Function>(std::move(fn));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return bool_;
    case Kind::integer: return int_ != 0;
    case Kind::floating: return float_ != 0.0;
    case Kind::string: return !string_.empty();
    case Kind::array: return !array_->empty();
    case Kind::object: return !object_->items.empty();
    case Kind::function: return true;
  }
  return false;
}

namespace {

std::string format_float(double f) {
  if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 1e16) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f", f);
    return buf;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", f);
  // Shortest form that reads back the same, like Python's repr.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[64];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, f);
    if (std::strtod(shorter, nullptr) == f) return shorter;
  }
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string python_quote(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + quote;
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::none: return "None";
    case Kind::boolean: return bool_ ? "True" : "False";
    case Kind::integer: return std::to_string(int_);
    case Kind::floating: return format_float(float_);
    case Kind::string: return string_;
    case Kind::function: return "<function>";
    case Kind::array:
    case Kind::object: return repr();
  }
  return "";
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::string: return python_quote(string_);
    case Kind::array: {
      std::string out = "[";
      for (size_t i = 0; i < array_->size(); ++i) {
        if (i) out += ", ";
        out += (*array_)[i].repr();
      }
      return out + "]";
    }
    case Kind::object: {
      std::string out = "{";
      for (size_t i = 0; i < object_->items.size(); ++i) {
        if (i) out += ", ";
        out += python_quote(object_->items[i].first);
        out += ": ";
        out += object_->items[i].second.repr();
      }
      return out + "}";
    }
    default: return str();
  }
}

std::string Value::to_json(int indent, int depth) const {
  std::string newline;
  std::string close;
  if (indent > 0) {
    newline.assign(static_cast<size_t>(indent * (depth + 1)) + 1, ' ');
    newline[0] = '\n';
    close.assign(static_cast<size_t>(indent * depth) + 1, ' ');
    close[0] = '\n';
  }
  const std::string comma = indent > 0 ? "," : ", ";
  switch (kind_) {
    case Kind::undefined:
    case Kind::none:
    case Kind::function: return "null";
    case Kind::boolean: return bool_ ? "true" : "false";
    case Kind::integer: return std::to_string(int_);
    case Kind::floating: return format_float(float_);
    case Kind::string: return json_string(string_);
    case Kind::array: {
      if (array_->empty()) return "[]";
      std::string out = "[";
      for (size_t i = 0; i < array_->size(); ++i) {
        if (i) out += comma;
        out += newline;
        out += (*array_)[i].to_json(indent, depth + 1);
      }
      return out + close + "]";
    }
    case Kind::object: {
      if (object_->items.empty()) return "{}";
      std::string out = "{";
      for (size_t i = 0; i < object_->items.size(); ++i) {
        if (i) out += comma;
        out += newline;
        out += json_string(object_->items[i].first);
        out += ": ";
        out += object_->items[i].second.to_json(indent, depth + 1);
      }
      return out + close + "}";
    }
  }
  return "null";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "undefined";
    case Kind::none: return "none";
    case Kind::boolean: return "boolean";
    case Kind::integer: return "integer";
    case Kind::floating: return "float";
    case Kind::string: return "string";
    case Kind::array: return "list";
    case Kind::object: return "dict";
    case Kind::function: return "function";
  }
  return "?";
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_float() == b.as_float();
  if (a.kind_ == Value::Kind::boolean && b.kind_ == Value::Kind::boolean) return a.bool_ == b.bool_;
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.string_ == b.string_;
    case Value::Kind::array: return *a.array_ == *b.array_;
    case Value::Kind::object: {
      if (a.object_->items.size() != b.object_->items.size()) return false;
      for (const auto& [k, v] : a.object_->items) {
        const Value* other = b.object_->find(k);
        if (!other || !(*other == v)) return false;
      }
      return true;
    }
    case Value::Kind::function: return a.function_ == b.function_;
    default: return false;
  }
}

Value CallArgs::get(size_t index, const std::string& name, Value fallback) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  if (index < positional.size()) return positional[index];
  return fallback;
}

}  // namespace loom::jinja
