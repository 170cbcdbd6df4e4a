#include "server/reply_parser_harmony.h"

#include <string>

namespace loom::server {

namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>";
constexpr std::string_view kSpace = " \n\t";

// The word after `key` in a header, up to a space or a marker (harmony.cpp's reading).
std::string header_field(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  const size_t begin = at + key.size();
  const size_t end = header.find_first_of(" <\n", begin);
  return std::string(header.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
}

class HarmonyParser : public ReplyParser {
 public:
  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    pending_ += delta;
    if (!structured_) {
      // Until a marker shows up the reply may be plain text (no harmony at all): held to the end.
      if (pending_.find(kChannel) == std::string::npos && pending_.find(kMessage) == std::string::npos) return;
      structured_ = true;
    }
    while (!pending_.empty()) {
      if (!in_body_) {  // a header, up to <|message|>; a <|start|> first drops it (as parse_harmony does)
        const size_t body = pending_.find(kMessage), start = pending_.find(kStart);
        if (start != std::string::npos && (body == std::string::npos || start < body)) {
          pending_.erase(0, start + kStart.size());
          continue;
        }
        if (body == std::string::npos) return;
        begin_body(pending_.substr(0, body), out);
        pending_.erase(0, body + kMessage.size());
        continue;
      }
      const size_t end = pending_.find(kStart);
      if (end == std::string::npos) {
        // Send all but a possible start of <|start|> and the trailing whitespace (the body is trimmed).
        size_t keep = 0;
        for (size_t n = std::min(pending_.size(), kStart.size() - 1); n > 0 && keep == 0; --n)
          if (pending_.compare(pending_.size() - n, n, kStart, 0, n) == 0) keep = n;
        size_t send = pending_.size() - keep;
        while (send > 0 && kSpace.find(pending_[send - 1]) != std::string_view::npos) --send;
        body(pending_.substr(0, send), out);
        pending_.erase(0, send);
        return;
      }
      body(pending_.substr(0, end), out, /*ends=*/true);
      pending_.erase(0, end + kStart.size());
      end_body(out);
    }
  }

  void finish(std::vector<ReplyEvent>& out) override {
    if (!structured_) {  // plain text: the answer, trimmed
      const size_t a = pending_.find_first_not_of(kSpace), b = pending_.find_last_not_of(kSpace);
      if (a != std::string::npos) out.push_back({ReplyEvent::Kind::text, pending_.substr(a, b - a + 1), -1, ""});
    } else if (in_body_) {
      body(pending_, out, /*ends=*/true);
      end_body(out);
    }
    pending_.clear();
  }

 private:
  enum class Kind { reasoning, content, call };

  void begin_body(std::string_view header, std::vector<ReplyEvent>& out) {
    const std::string channel = header_field(header, kChannel), recipient = header_field(header, "to=");
    in_body_ = true;
    body_started_ = false;
    if (recipient.rfind("functions.", 0) == 0) {
      kind_ = Kind::call;
      out.push_back({ReplyEvent::Kind::call_begin, "", calls_, recipient.substr(10)});
    } else {
      kind_ = channel == "analysis" ? Kind::reasoning : Kind::content;
    }
  }

  // Part of the current body: leading whitespace dropped; at the body's end, trailing whitespace too.
  void body(std::string_view piece, std::vector<ReplyEvent>& out, bool ends = false) {
    if (ends) {
      const size_t last = piece.find_last_not_of(kSpace);
      piece = last == std::string_view::npos ? std::string_view() : piece.substr(0, last + 1);
    }
    if (!body_started_) {
      const size_t first = piece.find_first_not_of(kSpace);
      if (first == std::string_view::npos) return;
      piece.remove_prefix(first);
      body_started_ = true;
      // Messages of a kind are joined by a blank line.
      bool& earlier = kind_ == Kind::reasoning ? has_reasoning_ : has_content_;
      if (kind_ != Kind::call && earlier) emit("\n\n", out);
      earlier = true;
    }
    if (!piece.empty()) emit(piece, out);
  }

  void emit(std::string_view piece, std::vector<ReplyEvent>& out) {
    const ReplyEvent::Kind kind = kind_ == Kind::reasoning ? ReplyEvent::Kind::reasoning
                                  : kind_ == Kind::content ? ReplyEvent::Kind::text
                                                           : ReplyEvent::Kind::call_arguments;
    out.push_back({kind, std::string(piece), kind_ == Kind::call ? calls_ : -1, ""});
  }

  void end_body(std::vector<ReplyEvent>& out) {
    if (kind_ == Kind::call) out.push_back({ReplyEvent::Kind::call_end, "", calls_++, ""});
    in_body_ = false;
  }

  std::string pending_;
  bool structured_ = false, in_body_ = false, body_started_ = false;
  bool has_reasoning_ = false, has_content_ = false;
  Kind kind_ = Kind::content;
  int calls_ = 0;
};

}  // namespace

std::unique_ptr<ReplyParser> harmony_reply_parser() { return std::make_unique<HarmonyParser>(); }

}  // namespace loom::server
