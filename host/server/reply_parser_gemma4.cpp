#include "server/reply_parser_gemma4.h"

#include <cctype>

#include <nlohmann/json.hpp>

namespace loom::server {

namespace {

constexpr std::string_view kOpen = "<|tool_call>call:", kClose = "<tool_call|>", kQuote = "<|\"|>";

size_t partial_marker_length(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// A piece of a string's content as JSON string text, without the quotes.
std::string escaped(std::string_view piece) {
  const std::string quoted = nlohmann::json(std::string(piece)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// The length of `text` without a UTF-8 character cut off at its end (a token may end inside one).
size_t whole_characters(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const auto byte = static_cast<unsigned char>(text[text.size() - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    return length > back ? text.size() - back : text.size();
  }
  return text.size();
}

class Gemma4Parser : public ReplyParser {
 public:
  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    pending_ += delta;
    step(out, false);
  }

  void finish(std::vector<ReplyEvent>& out) override {
    step(out, true);
    if (state_ == State::text) {
      text(pending_, out);
    } else if (state_ == State::name) {
      text(std::string(kOpen) + name_ + pending_, out);  // never became a call
    } else {
      arguments(pending_, out);  // the reply ended inside the call: it ends there
      end_call(out);
    }
    pending_.clear();
  }

 private:
  enum class State { text, name, key, value, string, scalar, after_value, close_tag };

  // Reads as much of pending_ as can be read without more text (a marker cut in half waits).
  void step(std::vector<ReplyEvent>& out, bool at_end) {
    at_end_ = at_end;
    size_t i = 0;
    auto wait_for = [&](std::string_view marker) {  // whether pending_[i..] may still become `marker`
      const std::string_view rest = std::string_view(pending_).substr(i);
      return !at_end && rest.size() < marker.size() && marker.substr(0, rest.size()) == rest;
    };
    while (i < pending_.size()) {
      const std::string_view rest = std::string_view(pending_).substr(i);
      const char c = pending_[i];
      switch (state_) {
        case State::text: {
          const size_t open = rest.find(kOpen);
          if (open == std::string_view::npos) {
            const size_t keep = at_end ? 0 : partial_marker_length(rest, kOpen);
            text(rest.substr(0, rest.size() - keep), out);
            i = pending_.size() - keep;
            pending_.erase(0, i);
            return;
          }
          text(rest.substr(0, open), out);
          i += open + kOpen.size();
          state_ = State::name;
          name_.clear();
          break;
        }
        case State::name:
          ++i;
          if (c != '{') {
            name_ += c;
            break;
          }
          out.push_back({ReplyEvent::Kind::call_begin, "", calls_, name_});
          open_container('{', out);
          break;
        case State::key:
          if (key_.empty() && std::isspace(static_cast<unsigned char>(c))) {
            ++i;
          } else if (key_.empty() && c == '}') {
            ++i;
            close_container('}', out);
          } else if (c == ':') {
            ++i;
            arguments("\"" + escaped(key_) + "\":", out);
            key_.clear();
            state_ = State::value;
          } else {
            key_ += c;
            ++i;
          }
          break;
        case State::value:
          if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
          } else if (c == '<') {
            if (wait_for(kQuote)) return keep_from(i);
            if (rest.substr(0, kQuote.size()) != kQuote) return fail(i, out);
            i += kQuote.size();
            arguments("\"", out);
            state_ = State::string;
          } else if (c == '{' || c == '[') {
            ++i;
            open_container(c, out);
          } else if (c == ']' && containers_.back() == '[') {  // an empty list
            ++i;
            close_container(']', out);
          } else {
            state_ = State::scalar;
          }
          break;
        case State::string: {
          const size_t end = rest.find(kQuote);
          const size_t keep = end != std::string_view::npos ? 0 : at_end ? 0 : partial_marker_length(rest, kQuote);
          const size_t length = end != std::string_view::npos ? end : at_end ? rest.size() : whole_characters(rest.substr(0, rest.size() - keep));
          arguments(escaped(rest.substr(0, length)), out);
          i += length;
          if (end == std::string_view::npos) return keep_from(i);
          i += kQuote.size();
          arguments("\"", out);
          state_ = State::after_value;
          break;
        }
        case State::scalar:
          if (c == ',' || c == '}' || c == ']') {
            state_ = State::after_value;
          } else {
            if (!std::isspace(static_cast<unsigned char>(c))) arguments(std::string_view(&c, 1), out);
            ++i;
          }
          break;
        case State::after_value:
          ++i;
          if (std::isspace(static_cast<unsigned char>(c))) break;
          if (c == ',') {
            arguments(",", out);
            state_ = containers_.back() == '{' ? State::key : State::value;
          } else if ((c == '}' && containers_.back() == '{') || (c == ']' && containers_.back() == '[')) {
            close_container(c, out);
          } else {
            return fail(i - 1, out);
          }
          break;
        case State::close_tag:
          if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
          } else if (wait_for(kClose)) {
            return keep_from(i);
          } else {
            if (rest.substr(0, kClose.size()) == kClose) i += kClose.size();
            end_call(out);
          }
          break;
      }
    }
    pending_.clear();
  }

  void open_container(char bracket, std::vector<ReplyEvent>& out) {
    containers_.push_back(bracket);
    arguments(std::string_view(&bracket, 1), out);
    state_ = bracket == '{' ? State::key : State::value;
  }

  void close_container(char bracket, std::vector<ReplyEvent>& out) {
    containers_.pop_back();
    arguments(std::string_view(&bracket, 1), out);
    state_ = containers_.empty() ? State::close_tag : State::after_value;
  }

  // Text that breaks the grammar: the call ends where it got to, and the rest is text again.
  void fail(size_t at, std::vector<ReplyEvent>& out) {
    end_call(out);
    pending_.erase(0, at);
    step(out, at_end_);
  }

  void keep_from(size_t at) { pending_.erase(0, at); }

  void end_call(std::vector<ReplyEvent>& out) {
    out.push_back({ReplyEvent::Kind::call_end, "", calls_++, ""});
    containers_.clear();
    key_.clear();
    state_ = State::text;
  }

  void text(std::string_view piece, std::vector<ReplyEvent>& out) {
    if (!piece.empty()) out.push_back({ReplyEvent::Kind::text, std::string(piece), -1, ""});
  }
  void arguments(std::string_view piece, std::vector<ReplyEvent>& out) {
    if (piece.empty()) return;
    if (!out.empty() && out.back().kind == ReplyEvent::Kind::call_arguments && out.back().call == calls_) out.back().text += piece;
    else out.push_back({ReplyEvent::Kind::call_arguments, std::string(piece), calls_, ""});
  }

  std::string pending_;
  bool at_end_ = false;
  State state_ = State::text;
  std::string name_, key_;
  std::string containers_;  // the open brackets, innermost last
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<ReplyParser> gemma4_reply_parser() { return std::make_unique<Gemma4Parser>(); }

}  // namespace loom::server
