// Hermes-style calls (Qwen 2.5/3, Hermes, SmolLM3): <tool_call>{"name": ..., "arguments": {...}}</tool_call>
// anywhere in the text, any number of them. Text outside the tags streams as it comes, except a
// possible start of "<tool_call>" at the end; a call's arguments stream as the model writes them.
// A tag whose content turns out not to be a call (no name) is sent back as text, as the whole-reply
// parser does.
#include "server/reply_parser_hermes.h"

#include "server/call_json_scanner.h"

namespace loom::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

// How many characters at the end of `text` could begin `marker` (a partial marker is held back).
size_t partial_marker_length(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

class HermesParser : public ReplyParser {
 public:
  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    pending_ += delta;
    while (!pending_.empty()) {
      if (!in_call_) {
        const size_t open = pending_.find(kOpen);
        if (open == std::string::npos) {
          const size_t keep = partial_marker_length(pending_, kOpen);
          text(pending_.substr(0, pending_.size() - keep), out);
          pending_.erase(0, pending_.size() - keep);
          return;
        }
        text(pending_.substr(0, open), out);
        pending_.erase(0, open + kOpen.size());
        in_call_ = true;
        scanner_ = CallJsonScanner();
        call_text_ = std::string(kOpen);
        continue;
      }
      if (!scanner_.closed()) {
        const CallJsonScanner::Found found = scanner_.feed(pending_);
        call_text_ += pending_.substr(0, found.consumed);
        pending_.erase(0, found.consumed);
        if (!found.name.empty()) out.push_back({ReplyEvent::Kind::call_begin, "", calls_, found.name});
        if (!found.arguments.empty()) out.push_back({ReplyEvent::Kind::call_arguments, found.arguments, calls_, ""});
        if (!found.closed) return;
      }
      // After the object: up to the closing tag (held until it is all there).
      const size_t close = pending_.find(kClose);
      if (close == std::string::npos) return;
      call_text_ += pending_.substr(0, close + kClose.size());
      pending_.erase(0, close + kClose.size());
      end_call(out);
    }
  }

  void finish(std::vector<ReplyEvent>& out) override {
    if (in_call_) {
      call_text_ += pending_;
      end_call(out);
    } else {
      text(pending_, out);
    }
    pending_.clear();
  }

 private:
  void text(std::string_view piece, std::vector<ReplyEvent>& out) {
    if (!piece.empty()) out.push_back({ReplyEvent::Kind::text, std::string(piece), -1, ""});
  }

  // The call ends (its tag closed, or the reply did): a call if it had a name, else text.
  void end_call(std::vector<ReplyEvent>& out) {
    if (!scanner_.name().empty()) out.push_back({ReplyEvent::Kind::call_end, "", calls_++, ""});
    else text(call_text_, out);
    in_call_ = false;
    call_text_.clear();
  }

  std::string pending_;  // received, not yet sent
  bool in_call_ = false;
  CallJsonScanner scanner_;
  std::string call_text_;  // the call's text so far, tag included (sent as text if it is no call)
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<ReplyParser> hermes_reply_parser() { return std::make_unique<HermesParser>(); }

}  // namespace loom::server
