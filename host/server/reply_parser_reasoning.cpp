#include "server/reply_parser_reasoning.h"

#include <string>

namespace loom::server {

namespace {

class ReasoningParser : public ReplyParser {
 public:
  ReasoningParser(ReasoningTags tags, bool starts_inside, std::unique_ptr<ReplyParser> inner)
      : open_(tags.open), close_(tags.close), starts_inside_(starts_inside), inner_(std::move(inner)) {}

  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    pending_ += delta;
    if (state_ == State::start) {
      // Spaces and newlines, then the opening tag or anything else: held until it is clear which.
      const size_t lead = pending_.find_first_not_of(" \n");
      if (lead == std::string::npos) return;
      const std::string_view rest = std::string_view(pending_).substr(lead);
      if (rest.size() < open_.size() && open_.substr(0, rest.size()) == rest) return;
      if (rest.substr(0, open_.size()) == open_) {
        pending_.erase(0, lead + open_.size());
        state_ = State::reasoning;
      } else if (starts_inside_) {
        state_ = State::reasoning;  // the prompt opened the block (a repeated opening tag is dropped)
      } else {
        state_ = State::content;
        at_content_start_ = false;  // no block: the reply is all content, as written
      }
    }
    if (state_ == State::reasoning) {
      const size_t close = pending_.find(close_);
      if (close == std::string::npos) {
        // Hold a possible start of the closing tag, and newlines that may turn out to end the block.
        size_t keep = 0;
        for (size_t n = std::min(pending_.size(), close_.size() - 1); n > 0 && keep == 0; --n)
          if (pending_.compare(pending_.size() - n, n, close_, 0, n) == 0) keep = n;
        size_t send = pending_.size() - keep;
        while (send > 0 && pending_[send - 1] == '\n') --send;
        reasoning(pending_.substr(0, send), out);
        pending_.erase(0, send);
        return;
      }
      std::string last = pending_.substr(0, close);
      while (!last.empty() && last.back() == '\n') last.pop_back();
      reasoning(last, out);
      pending_.erase(0, close + close_.size());
      state_ = State::content;
    }
    if (state_ == State::content) {
      if (at_content_start_) {  // newlines after the block are dropped
        const size_t first = pending_.find_first_not_of('\n');
        if (first == std::string::npos) {
          pending_.clear();
          return;
        }
        pending_.erase(0, first);
        at_content_start_ = false;
      }
      inner_->feed(pending_, out);
      pending_.clear();
    }
  }

  void finish(std::vector<ReplyEvent>& out) override {
    if (state_ == State::start && !starts_inside_) inner_->feed(pending_, out);  // only spaces, or part of the opening tag: text
    if (state_ == State::start && starts_inside_) state_ = State::reasoning;
    if (state_ == State::reasoning) {  // cut off while thinking
      while (!pending_.empty() && pending_.back() == '\n') pending_.pop_back();
      reasoning(pending_, out);
    }
    pending_.clear();
    inner_->finish(out);
  }

 private:
  enum class State { start, reasoning, content };

  void reasoning(std::string_view piece, std::vector<ReplyEvent>& out) {
    if (started_reasoning_ == false) {  // newlines opening the block are dropped
      const size_t first = piece.find_first_not_of('\n');
      if (first == std::string_view::npos) return;
      piece.remove_prefix(first);
      started_reasoning_ = true;
    }
    if (!piece.empty()) out.push_back({ReplyEvent::Kind::reasoning, std::string(piece), -1, ""});
  }

  const std::string open_, close_;
  const bool starts_inside_;
  State state_ = State::start;
  std::unique_ptr<ReplyParser> inner_;
  std::string pending_;
  bool started_reasoning_ = false, at_content_start_ = true;
};

}  // namespace

std::unique_ptr<ReplyParser> reasoning_reply_parser(ReasoningTags tags, bool starts_inside, std::unique_ptr<ReplyParser> inner) {
  return std::make_unique<ReasoningParser>(tags, starts_inside, std::move(inner));
}

}  // namespace loom::server
