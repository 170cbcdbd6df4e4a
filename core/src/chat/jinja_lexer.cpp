#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace loom::jinja {
namespace {

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    bool trim_next = false;  // a preceding "-%}"/"-}}" strips leading whitespace of the next text
    bool trim_newline = false;  // trim_blocks: a preceding "%}" eats one newline
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text(src_.substr(pos_, tag - pos_));
      if (trim_next) {
        text.erase(0, text.find_first_not_of(" \t\r\n") == std::string::npos ? text.size() : text.find_first_not_of(" \t\r\n"));
      } else if (trim_newline) {
        if (text.rfind("\r\n", 0) == 0) {
          text.erase(0, 2);
        } else if (!text.empty() && text[0] == '\n') {
          text.erase(0, 1);
        }
      }
      trim_next = trim_newline = false;
      if (tag == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      const char kind = src_[tag + 1];
      const bool minus = tag + 2 < src_.size() && src_[tag + 2] == '-';
      const bool plus = tag + 2 < src_.size() && src_[tag + 2] == '+';
      line_ += count_lines(src_.substr(pos_, tag - pos_));
      if (minus) {
        text.erase(text.find_last_not_of(" \t\r\n") == std::string::npos ? 0 : text.find_last_not_of(" \t\r\n") + 1);
      } else if (kind != '{' && !plus) {
        // lstrip_blocks: spaces and tabs between a source line's start and a block or comment tag vanish.
        const std::string_view raw = src_.substr(pos_, tag - pos_);
        const size_t newline = raw.find_last_of('\n');
        const bool line_start = newline != std::string_view::npos || pos_ == 0 || src_[pos_ - 1] == '\n';
        const std::string_view indent = newline == std::string_view::npos ? raw : raw.substr(newline + 1);
        if (line_start && indent.find_first_not_of(" \t") == std::string_view::npos) {
          text.erase(text.size() - std::min(text.size(), indent.size()));
        }
      }
      emit_text(std::move(text));
      pos_ = tag + 2 + ((minus || plus) ? 1 : 0);
      if (kind == '#') {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string_view::npos) fail("comment '{#' is never closed with '#}'");
        line_ += count_lines(src_.substr(pos_, end - pos_));
        trim_next = end > pos_ && src_[end - 1] == '-';
        trim_newline = !trim_next;
        pos_ = end + 2;
        continue;
      }
      const bool is_var = kind == '{';
      tokens_.push_back({is_var ? Token::Kind::var_begin : Token::Kind::block_begin, "", line_});
      lex_inside(is_var ? '}' : '%', trim_next);
      trim_newline = !is_var && !trim_next;
    }
    tokens_.push_back({Token::Kind::eof, "", line_});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error("chat template: line " + std::to_string(line_) + ": " + message);
  }

  static int count_lines(std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::text, std::move(text), line_});
  }

  // Tokens until the closing "}}" or "%}"; sets `trim_after` when it is "-}}"/"-%}".
  void lex_inside(char closer, bool& trim_after) {
    const Token::Kind end_kind = closer == '}' ? Token::Kind::var_end : Token::Kind::block_end;
    while (true) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) fail(std::string("tag is never closed with '") + closer + "}'");
      const char c = src_[pos_];
      if (c == '-' && pos_ + 2 < src_.size() && src_[pos_ + 1] == closer && src_[pos_ + 2] == '}') {
        trim_after = true;
        pos_ += 3;
        tokens_.push_back({end_kind, "", line_});
        return;
      }
      if (c == closer && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}') {
        trim_after = false;
        pos_ += 2;
        tokens_.push_back({end_kind, "", line_});
        return;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        const size_t start = pos_;
        while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        tokens_.push_back({Token::Kind::name, std::string(src_.substr(start, pos_ - start)), line_});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        const size_t start = pos_;
        bool is_float = false;
        while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
          is_float = true;
          ++pos_;
          while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        }
        tokens_.push_back({is_float ? Token::Kind::floating : Token::Kind::integer,
                           std::string(src_.substr(start, pos_ - start)), line_});
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      static constexpr std::string_view two_char_ops[] = {"==", "!=", "<=", ">=", "//", "**"};
      bool matched = false;
      for (std::string_view op : two_char_ops) {
        if (src_.substr(pos_, 2) == op) {
          tokens_.push_back({Token::Kind::op, std::string(op), line_});
          pos_ += 2;
          matched = true;
          break;
        }
      }
      if (matched) continue;
      if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) {
        tokens_.push_back({Token::Kind::op, std::string(1, c), line_});
        ++pos_;
        continue;
      }
      fail(std::string("unexpected character '") + c + "' inside a tag");
    }
  }

  void lex_string(char quote) {
    const int start_line = line_;
    ++pos_;
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) {
        line_ = start_line;
        fail("string literal is never closed");
      }
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || pos_ >= src_.size()) {
        value += c;
        continue;
      }
      const char e = src_[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        default: value += '\\'; value += e;
      }
    }
    tokens_.push_back({Token::Kind::string, std::move(value), start_line});
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace loom::jinja
