#include "server/reply_parser_llama3.h"

#include <cctype>
#include <string>

#include "server/call_json_scanner.h"

namespace loom::server {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3Parser : public ReplyParser {
 public:
  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    pending_ += delta;
    while (!pending_.empty()) {
      if (state_ == State::start) {
        // Whitespace and the optional tag, then '{' (calls) or anything else (text): held until clear.
        size_t at = pending_.find_first_not_of(" \t\r\n");
        if (at == std::string::npos) return;
        std::string_view rest = std::string_view(pending_).substr(at);
        if (rest.size() < kPythonTag.size() && kPythonTag.substr(0, rest.size()) == rest) return;
        if (rest.substr(0, kPythonTag.size()) == kPythonTag) {
          at = pending_.find_first_not_of(" \t\r\n", at + kPythonTag.size());
          if (at == std::string::npos) return;
          rest = std::string_view(pending_).substr(at);
        }
        if (rest[0] == '{') {
          pending_.erase(0, at);
          state_ = State::call;
        } else {
          state_ = State::text;
        }
        continue;
      }
      if (state_ == State::text) {
        out.push_back({ReplyEvent::Kind::text, pending_, -1, ""});
        pending_.clear();
        return;
      }
      if (state_ == State::separator) {  // whitespace and ';' between calls
        size_t n = 0;
        while (n < pending_.size() && (std::isspace(static_cast<unsigned char>(pending_[n])) || pending_[n] == ';')) ++n;
        pending_.erase(0, n);
        if (pending_.empty()) return;
        state_ = pending_[0] == '{' ? State::call : State::text;
        continue;
      }
      const CallJsonScanner::Found found = scanner_.feed(pending_);
      pending_.erase(0, found.consumed);
      if (!found.name.empty()) out.push_back({ReplyEvent::Kind::call_begin, "", calls_, found.name});
      if (!found.arguments.empty()) out.push_back({ReplyEvent::Kind::call_arguments, found.arguments, calls_, ""});
      if (!found.closed) return;
      end_call(out);
      state_ = State::separator;
    }
  }

  void finish(std::vector<ReplyEvent>& out) override {
    if (state_ == State::call && scanner_.started()) end_call(out);
    else if (!pending_.empty() && state_ != State::separator) out.push_back({ReplyEvent::Kind::text, pending_, -1, ""});
    pending_.clear();
  }

 private:
  enum class State { start, call, separator, text };

  void end_call(std::vector<ReplyEvent>& out) {
    if (!scanner_.name().empty()) out.push_back({ReplyEvent::Kind::call_end, "", calls_++, ""});
    else out.push_back({ReplyEvent::Kind::text, scanner_.raw(), -1, ""});  // an object that is no call
    scanner_ = CallJsonScanner();
  }

  State state_ = State::start;
  std::string pending_;
  CallJsonScanner scanner_;
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<ReplyParser> llama3_reply_parser() { return std::make_unique<Llama3Parser>(); }

}  // namespace loom::server
