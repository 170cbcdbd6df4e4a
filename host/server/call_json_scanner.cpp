#include "server/call_json_scanner.h"

#include <cctype>

#include <nlohmann/json.hpp>

namespace loom::server {

namespace {

bool is_arguments_key(const std::string& key) { return key == "arguments" || key == "parameters"; }

// A JSON string literal's value; "" when it does not parse.
std::string string_value(std::string_view literal) {
  const nlohmann::json value = nlohmann::json::parse(literal, nullptr, false);
  return value.is_string() ? value.get<std::string>() : std::string();
}

}  // namespace

CallJsonScanner::Found CallJsonScanner::feed(std::string_view text) {
  Found found;
  // Argument text goes out once the name is known (a client needs the call's name first).
  auto emit = [&](std::string_view piece) {
    if (name_.empty()) held_arguments_ += piece;
    else found.arguments += piece;
  };
  for (size_t i = 0; i < text.size() && !closed_; ++i) {
    const char c = text[i];
    found.consumed = i + 1;
    if (depth_ == 0 && c != '{') continue;  // before the object: whitespace
    raw_ += c;
    const bool value_pending = depth_ == 1 && in_value_ && value_start_ == 0;
    if (in_string_) {
      if (arguments_open_ && value_depth_ < depth_) emit(std::string_view(&c, 1));
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 1) {
          const std::string value = string_value(std::string_view(raw_).substr(string_start_));
          if (!in_value_) {
            key_ = value;
          } else {
            if (key_ == "name" && name_.empty() && !value.empty()) {
              name_ = value;
              found.name = value;
              found.arguments = held_arguments_ + found.arguments;
              held_arguments_.clear();
            } else if (is_arguments_key(key_)) {
              emit(value);  // arguments written as a string of JSON: its text, unescaped
            }
            value_ended(found);
          }
        }
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        string_start_ = raw_.size() - 1;
        if (value_pending) value_start_ = string_start_ + 1;
        if (arguments_open_) emit("\"");
        break;
      case '{':
      case '[':
        ++depth_;
        if (depth_ == 2 && in_value_ && value_start_ == 0) {
          value_start_ = raw_.size();
          value_depth_ = 1;
          arguments_open_ = is_arguments_key(key_);
        }
        if (arguments_open_) emit(std::string_view(&c, 1));
        break;
      case '}':
      case ']':
        if (arguments_open_) emit(std::string_view(&c, 1));
        --depth_;
        if (depth_ == 1 && in_value_) value_ended(found);
        if (depth_ == 0) {
          if (in_value_) value_ended(found);  // a number or literal before the closing brace
          closed_ = true;
          found.closed = true;
        }
        break;
      case ':':
        if (depth_ == 1 && !in_value_) in_value_ = true;
        else if (arguments_open_) emit(":");
        break;
      case ',':
        if (depth_ == 1) {
          if (in_value_) value_ended(found);
          in_value_ = false;
        } else if (arguments_open_) {
          emit(",");
        }
        break;
      default:
        if (value_pending && !std::isspace(static_cast<unsigned char>(c))) value_start_ = raw_.size();  // a number or literal
        if (arguments_open_) emit(std::string_view(&c, 1));
    }
  }
  return found;
}

void CallJsonScanner::value_ended(Found&) {
  in_value_ = false;
  value_start_ = 0;
  arguments_open_ = false;
  key_.clear();
}

}  // namespace loom::server
