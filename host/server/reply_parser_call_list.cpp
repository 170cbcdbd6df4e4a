// Calls written as a JSON list of call objects after a marker: Mistral's [TOOL_CALLS][{...}, ...] (or one
// object), and the forced-call grammar's [{"name", "parameters"}, ...], whose marker is the reply's
// start. Text before the marker streams as it comes (a possible start of the marker at the end is
// held); each call's arguments stream as the model writes them; text after the list is text again.
// Unlike the whole-reply parser, a list whose later item is no call cannot take back the calls
// already sent: that item and the rest of the list go out as text.
#include "server/reply_parser_call_list.h"

#include <cctype>

#include "server/call_json_scanner.h"

namespace loom::server {

namespace {

class CallListParser : public ReplyParser {
 public:
  explicit CallListParser(std::string marker) : marker_(std::move(marker)), state_(marker_.empty() ? State::list_start : State::text) {}

  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    pending_ += delta;
    while (!pending_.empty()) {
      switch (state_) {
        case State::text: {
          const size_t at = pending_.find(marker_);
          if (at == std::string::npos) {
            size_t keep = 0;  // a possible start of the marker at the end
            for (size_t n = std::min(pending_.size(), marker_.size() - 1); n > 0 && keep == 0; --n)
              if (pending_.compare(pending_.size() - n, n, marker_, 0, n) == 0) keep = n;
            text(pending_.substr(0, pending_.size() - keep), out);
            pending_.erase(0, pending_.size() - keep);
            return;
          }
          text(pending_.substr(0, at), out);
          pending_.erase(0, at + marker_.size());
          state_ = State::list_start;
          break;
        }
        case State::list_start:  // '[' (a list) or '{' (one call), after whitespace
          if (!skip_space()) return;
          if (pending_[0] == '[') {
            in_list_ = true;
            pending_.erase(0, 1);
            state_ = State::item;
          } else if (pending_[0] == '{') {
            in_list_ = false;
            state_ = State::item;
          } else {
            state_ = State::text;  // not a list of calls after all
            if (!marker_.empty()) text(marker_, out);
          }
          break;
        case State::item: {
          if (!scanner_.started() && !skip_space()) return;
          if (!scanner_.started() && pending_[0] != '{') {
            state_ = State::text;  // an item that is no object: the rest is text
            continue;
          }
          const CallJsonScanner::Found found = scanner_.feed(pending_);
          pending_.erase(0, found.consumed);
          if (!found.name.empty()) out.push_back({ReplyEvent::Kind::call_begin, "", calls_, found.name});
          if (!found.arguments.empty()) out.push_back({ReplyEvent::Kind::call_arguments, found.arguments, calls_, ""});
          if (!found.closed) return;
          end_item(out);
          state_ = in_list_ ? State::separator : State::text;
          break;
        }
        case State::separator:  // ',' before the next item, or ']' ending the list
          if (!skip_space()) return;
          if (pending_[0] == ',') state_ = State::item;
          else state_ = State::text;  // ']' or anything else ends the list
          if (pending_[0] == ',' || pending_[0] == ']') pending_.erase(0, 1);
          break;
      }
    }
  }

  void finish(std::vector<ReplyEvent>& out) override {
    if (state_ == State::item && scanner_.started()) end_item(out);
    else text(pending_, out);
    pending_.clear();
  }

 private:
  enum class State { text, list_start, item, separator };

  // Drops leading whitespace; false when nothing else is there yet.
  bool skip_space() {
    size_t n = 0;
    while (n < pending_.size() && std::isspace(static_cast<unsigned char>(pending_[n]))) ++n;
    pending_.erase(0, n);
    return !pending_.empty();
  }

  void text(std::string_view piece, std::vector<ReplyEvent>& out) {
    if (!piece.empty()) out.push_back({ReplyEvent::Kind::text, std::string(piece), -1, ""});
  }

  // An item ended: a call if it had a name, else its text.
  void end_item(std::vector<ReplyEvent>& out) {
    if (!scanner_.name().empty()) out.push_back({ReplyEvent::Kind::call_end, "", calls_++, ""});
    else text(scanner_.raw(), out);
    scanner_ = CallJsonScanner();
  }

  const std::string marker_;
  State state_;
  bool in_list_ = false;
  std::string pending_;
  CallJsonScanner scanner_;
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<ReplyParser> call_list_reply_parser(std::string marker) { return std::make_unique<CallListParser>(std::move(marker)); }

}  // namespace loom::server
