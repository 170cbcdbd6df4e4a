#include "flat_json.h"

#include <cctype>

#include <stdexcept>

namespace loom::plugin_support {
namespace {

struct Scanner {
  const std::string& s;
  size_t i = 0;
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("config_json: " + what + " at offset " + std::to_string(i) + " in " + s);
  }
  void skip_ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) i++;
  }
  char peek() {
    skip_ws();
    return i < s.size() ? s[i] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    i++;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) i++;
      out += s[i++];
    }
    if (i >= s.size()) fail("unterminated string");
    i++;
    return out;
  }
  // Skips any value; returns scalar text (empty for objects and arrays).
  std::string value() {
    const char c = peek();
    if (c == '"') return string();
    if (c == '{' || c == '[') {
      int depth = 0;
      bool in_string = false;
      for (; i < s.size(); i++) {
        if (in_string) {
          if (s[i] == '\\') i++;
          else if (s[i] == '"') in_string = false;
        } else if (s[i] == '"') in_string = true;
        else if (s[i] == '{' || s[i] == '[') depth++;
        else if ((s[i] == '}' || s[i] == ']') && --depth == 0) {
          i++;
          return {};
        }
      }
      fail("unterminated object or array");
    }
    const size_t start = i;
    while (i < s.size() && s[i] != ',' && s[i] != '}' && !std::isspace(static_cast<unsigned char>(s[i]))) i++;
    if (i == start) fail("expected a value");
    return s.substr(start, i - start);
  }
};

}  // namespace

std::map<std::string, std::string> parse_flat_json(const std::string& text) {
  std::map<std::string, std::string> out;
  Scanner sc{text};
  if (sc.peek() == '\0') return out;  // empty config = defaults
  sc.expect('{');
  if (sc.peek() == '}') return out;
  while (true) {
    std::string key = sc.string();
    sc.expect(':');
    out[key] = sc.value();
    if (sc.peek() == ',') {
      sc.i++;
      continue;
    }
    sc.expect('}');
    return out;
  }
}

std::optional<bool> json_bool(const std::map<std::string, std::string>& obj, const std::string& key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->second == "null") return std::nullopt;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  throw std::invalid_argument("config_json: \"" + key + "\" must be true or false, got " + it->second);
}

std::optional<long long> json_int(const std::map<std::string, std::string>& obj, const std::string& key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->second == "null") return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("config_json: \"" + key + "\" must be an integer, got " + it->second);
}

std::optional<std::string> json_string(const std::map<std::string, std::string>& obj, const std::string& key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->second == "null") return std::nullopt;
  return it->second;
}

}  // namespace loom::plugin_support
