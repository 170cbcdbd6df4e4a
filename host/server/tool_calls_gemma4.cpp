#include "server/tool_calls_gemma4.h"

#include <cctype>

namespace loom::server {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<|tool_call>call:", kClose = "<tool_call|>", kQuote = "<|\"|>";

// A recursive-descent reader of one Gemma 4 value at text[pos]; advances pos, nullopt on a syntax error.
class ValueReader {
 public:
  ValueReader(const std::string& text, size_t pos) : text_(text), pos_(pos) {}
  size_t pos() const { return pos_; }

  std::optional<json> value() {
    skip_space();
    if (starts_with(kQuote)) return string();
    if (peek() == '{') return dict();
    if (peek() == '[') return array();
    return scalar();
  }

  std::optional<json> dict() {
    if (peek() != '{') return std::nullopt;
    ++pos_;
    json out = json::object();
    skip_space();
    if (peek() == '}') return ++pos_, out;
    while (true) {
      skip_space();
      const size_t colon = text_.find(':', pos_);
      if (colon == std::string::npos) return std::nullopt;
      std::string key = text_.substr(pos_, colon - pos_);
      if (key.empty() || key.find_first_of("{}") != std::string::npos) return std::nullopt;
      pos_ = colon + 1;
      auto v = value();
      if (!v) return std::nullopt;
      out[key] = std::move(*v);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') return ++pos_, out;
      return std::nullopt;
    }
  }

 private:
  std::optional<json> array() {
    ++pos_;
    json out = json::array();
    skip_space();
    if (peek() == ']') return ++pos_, out;
    while (true) {
      auto v = value();
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') return ++pos_, out;
      return std::nullopt;
    }
  }

  std::optional<json> string() {
    pos_ += kQuote.size();
    const size_t end = text_.find(kQuote, pos_);
    if (end == std::string::npos) return std::nullopt;
    json out = text_.substr(pos_, end - pos_);
    pos_ = end + kQuote.size();
    return out;
  }

  // A number, true, false or null: the JSON literal up to the next delimiter.
  std::optional<json> scalar() {
    const size_t end = text_.find_first_of(",}]", pos_);
    if (end == std::string::npos) return std::nullopt;
    std::string literal = text_.substr(pos_, end - pos_);
    while (!literal.empty() && std::isspace(static_cast<unsigned char>(literal.back()))) literal.pop_back();
    json out = json::parse(literal, nullptr, false);
    if (out.is_discarded() || out.is_structured() || out.is_string()) return std::nullopt;
    pos_ = end;
    return out;
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool starts_with(std::string_view s) const { return text_.compare(pos_, s.size(), s) == 0; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  const std::string& text_;
  size_t pos_;
};

}  // namespace

std::optional<Gemma4Reply> parse_gemma4_tool_calls(const std::string& text) {
  Gemma4Reply reply;
  size_t pos = 0;
  while (true) {
    const size_t start = text.find(kOpen, pos);
    if (start == std::string::npos) break;
    const size_t name_start = start + kOpen.size();
    const size_t brace = text.find('{', name_start);
    if (brace == std::string::npos || brace == name_start) return std::nullopt;
    Gemma4Call call{text.substr(name_start, brace - name_start), json::object()};
    ValueReader reader(text, brace);
    auto arguments = reader.dict();
    if (!arguments || text.compare(reader.pos(), kClose.size(), kClose) != 0) return std::nullopt;
    call.arguments = std::move(*arguments);
    reply.content += text.substr(pos, start - pos);
    reply.calls.push_back(std::move(call));
    pos = reader.pos() + kClose.size();
  }
  reply.content += text.substr(pos);
  return reply;
}

}  // namespace loom::server
