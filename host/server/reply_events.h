// A reply as typed events, found while it is generated: text and reasoning as they come, and each
// tool call as its start (its name), pieces of its arguments (JSON text, in order) and its end. One
// incremental parser per output format turns generated text into these (issue 40); the API shapes
// (Chat Completions, Responses, Messages) are thin formatters over them. reply_stream.h picks the
// parser a request needs; adding a format is one parser file and one line there.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::server {

struct ReplyEvent {
  enum class Kind { text, reasoning, call_begin, call_arguments, call_end };
  Kind kind;
  std::string text;  // text, reasoning, or a piece of the call's arguments
  int call = -1;     // call events: the call's number in the reply, from 0
  std::string name;  // call_begin: the function's name
};

class ReplyParser {
 public:
  virtual ~ReplyParser() = default;
  // The next piece of generated text; appends the events it completes. A parser may hold back text
  // that could still turn out to be the start of a call (a marker's first characters).
  virtual void feed(std::string_view delta, std::vector<ReplyEvent>& out) = 0;
  // The reply ended: what was held back goes out as what it turned out to be. A call left unfinished
  // ends there (its arguments are what was generated).
  virtual void finish(std::vector<ReplyEvent>& out) = 0;
};

}  // namespace loom::server
