// A chat choice's reply read as it is generated, through the one incremental parser its job needs
// (reply_events.h): the model family's call format, the forced-call list, harmony, and reasoning tags
// in front. Streams and whole replies both read replies here, so they agree by construction:
//   - with tools, the text around calls is trimmed as a whole reply's is (leading whitespace dropped,
//     trailing whitespace held until more text follows it);
//   - without tools, calls a model writes anyway are dropped (harmony's), and text passes unchanged;
//   - each call gets its id at its start, and a call written without arguments gets "{}".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/reply_events.h"
#include "server/tool_calls.h"

namespace loom::server {

class GenerationJob;

class ReplyStream {
 public:
  explicit ReplyStream(const GenerationJob& job);

  // The events of the next piece of the reply; `ended`: the reply is over (what was held goes out).
  std::vector<ReplyEvent> read(std::string_view delta, bool ended);

  const std::string& call_id(int call) const { return call_ids_.at(size_t(call)); }
  size_t calls() const { return call_ids_.size(); }

 private:
  void add_text(std::string piece, std::vector<ReplyEvent>& out);

  std::unique_ptr<ReplyParser> parser_;
  bool keep_calls_ = false, trim_text_ = false;
  bool text_started_ = false;
  std::string held_space_;
  std::vector<std::string> call_ids_;
  std::vector<bool> call_has_arguments_;
};

struct WholeReply {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// A finished reply read in one piece.
WholeReply read_whole_reply(const GenerationJob& job, const std::string& text);

}  // namespace loom::server
