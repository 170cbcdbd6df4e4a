#include "server/reply_stream.h"

#include "server/generation.h"
#include "server/reply_parser_call_list.h"
#include "server/reply_parser_gemma4.h"
#include "server/reply_parser_harmony.h"
#include "server/reply_parser_hermes.h"
#include "server/reply_parser_llama3.h"
#include "server/reply_parser_reasoning.h"

namespace loom::server {

namespace {

// A reply with nothing to find in it: all text.
class PlainTextParser : public ReplyParser {
 public:
  void feed(std::string_view delta, std::vector<ReplyEvent>& out) override {
    if (!delta.empty()) out.push_back({ReplyEvent::Kind::text, std::string(delta), -1, ""});
  }
  void finish(std::vector<ReplyEvent>&) override {}
};

bool tools_active(const GenerationJob& job) { return job.params().tools && job.params().tools->choice != ToolChoice::none; }

std::unique_ptr<ReplyParser> call_parser(const GenerationJob& job) {
  const ToolChoice choice = job.params().tools->choice;
  if (choice == ToolChoice::required || choice == ToolChoice::named) return call_list_reply_parser("");  // the grammar's list
  switch (tool_call_format(job.state().chat_template.source())) {
    case ToolCallFormat::hermes: return hermes_reply_parser();
    case ToolCallFormat::llama3: return llama3_reply_parser();
    case ToolCallFormat::mistral: return call_list_reply_parser("[TOOL_CALLS]");
    case ToolCallFormat::gemma4: return gemma4_reply_parser();
  }
  return hermes_reply_parser();
}

std::unique_ptr<ReplyParser> parser_for(const GenerationJob& job) {
  if (job.harmony()) return harmony_reply_parser();  // its channels carry reasoning and calls alike
  std::unique_ptr<ReplyParser> inner = tools_active(job) ? call_parser(job) : std::make_unique<PlainTextParser>();
  if (!job.reasoning()) return inner;
  return reasoning_reply_parser(job.reasoning_tags(), job.reasoning_starts_inside(), std::move(inner));
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

ReplyStream::ReplyStream(const GenerationJob& job)
    : parser_(parser_for(job)), keep_calls_(tools_active(job)), trim_text_(tools_active(job)) {}

std::vector<ReplyEvent> ReplyStream::read(std::string_view delta, bool ended) {
  std::vector<ReplyEvent> found;
  if (!delta.empty()) parser_->feed(delta, found);
  if (ended) parser_->finish(found);
  std::vector<ReplyEvent> out;
  for (ReplyEvent& event : found) {
    switch (event.kind) {
      case ReplyEvent::Kind::text:
        add_text(std::move(event.text), out);
        break;
      case ReplyEvent::Kind::reasoning:
        if (!event.text.empty()) out.push_back(std::move(event));
        break;
      case ReplyEvent::Kind::call_begin:
        if (!keep_calls_) break;
        call_ids_.push_back(new_call_id());
        call_has_arguments_.push_back(false);
        out.push_back(std::move(event));
        break;
      case ReplyEvent::Kind::call_arguments:
        if (!keep_calls_ || event.text.empty()) break;
        call_has_arguments_.at(size_t(event.call)) = true;
        out.push_back(std::move(event));
        break;
      case ReplyEvent::Kind::call_end:
        if (!keep_calls_) break;
        if (!call_has_arguments_.at(size_t(event.call))) out.push_back({ReplyEvent::Kind::call_arguments, "{}", event.call, ""});
        out.push_back(std::move(event));
        break;
    }
  }
  return out;
}

void ReplyStream::add_text(std::string piece, std::vector<ReplyEvent>& out) {
  if (trim_text_) {
    if (!text_started_) {
      size_t start = 0;
      while (start < piece.size() && is_space(piece[start])) ++start;
      piece.erase(0, start);
    }
    size_t end = piece.size();
    while (end > 0 && is_space(piece[end - 1])) --end;
    if (end == 0) {  // all whitespace: held until text follows it (dropped at the end of the reply)
      if (text_started_) held_space_ += piece;
      return;
    }
    std::string trailing = piece.substr(end);
    piece = held_space_ + piece.substr(0, end);
    held_space_ = std::move(trailing);
  }
  if (piece.empty()) return;
  text_started_ = true;
  out.push_back({ReplyEvent::Kind::text, std::move(piece), -1, ""});
}

WholeReply read_whole_reply(const GenerationJob& job, const std::string& text) {
  ReplyStream stream(job);
  WholeReply reply;
  for (ReplyEvent& event : stream.read(text, true)) {
    switch (event.kind) {
      case ReplyEvent::Kind::text: reply.content += event.text; break;
      case ReplyEvent::Kind::reasoning: reply.reasoning += event.text; break;
      case ReplyEvent::Kind::call_begin: reply.calls.push_back({stream.call_id(event.call), event.name, ""}); break;
      case ReplyEvent::Kind::call_arguments: reply.calls.at(size_t(event.call)).arguments += event.text; break;
      case ReplyEvent::Kind::call_end: break;
    }
  }
  return reply;
}

}  // namespace loom::server
