// The incremental reply parsers (host/server/reply_events.h): whatever pieces the reply arrives in,
// the events add up to the text and calls the whole-reply parser finds, and a call's arguments go out
// while the model is still writing them.
#include <catch2/catch.hpp>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "server/reply_parser_call_list.h"
#include "server/harmony.h"
#include "server/reply_parser_gemma4.h"
#include "server/reply_parser_harmony.h"
#include "server/reply_parser_hermes.h"
#include "server/reply_parser_llama3.h"
#include "server/reply_parser_reasoning.h"
#include "server/tool_calls.h"

namespace {

using loom::server::ReplyEvent;

struct Assembled {
  std::string text, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::vector<ReplyEvent> events;
};

using MakeParser = std::function<std::unique_ptr<loom::server::ReplyParser>()>;

// The reply fed in pieces of the given sizes (cycled), then finished.
Assembled run(const std::string& reply, const std::vector<size_t>& sizes, const MakeParser& make = loom::server::hermes_reply_parser) {
  auto parser = make();
  Assembled a;
  for (size_t pos = 0, k = 0; pos < reply.size(); ++k) {
    const size_t n = std::min(sizes[k % sizes.size()], reply.size() - pos);
    parser->feed(std::string_view(reply).substr(pos, n), a.events);
    pos += n;
  }
  parser->finish(a.events);
  for (const ReplyEvent& e : a.events) {
    if (e.kind == ReplyEvent::Kind::text) a.text += e.text;
    if (e.kind == ReplyEvent::Kind::reasoning) a.reasoning += e.text;
    if (e.kind == ReplyEvent::Kind::call_begin) a.calls.push_back({e.name, ""});
    if (e.kind == ReplyEvent::Kind::call_arguments) a.calls.at(size_t(e.call)).second += e.text;
  }
  return a;
}

nlohmann::json parsed(const std::string& text) { return nlohmann::json::parse(text, nullptr, false); }

// Every way of cutting the reply gives what the whole-reply parser gives (calls' arguments as JSON).
void require_like_whole_parser(const std::string& reply, const MakeParser& make = loom::server::hermes_reply_parser,
                               const std::function<loom::server::ParsedReply(const std::string&)>& whole_parser =
                                   [](const std::string& text) {
                                     return loom::server::parse_tool_calls(text, loom::server::ToolCallFormat::hermes);
                                   }) {
  const loom::server::ParsedReply whole = whole_parser(reply);
  std::mt19937 rng(7);
  std::vector<std::vector<size_t>> cuts = {{1}, {2}, {3}, {5}, {reply.size()}};
  for (int i = 0; i < 8; ++i) cuts.push_back({1 + rng() % 9, 1 + rng() % 4, 1 + rng() % 17});
  for (const auto& sizes : cuts) {
    INFO("reply " << reply << " in pieces of " << sizes[0] << "...");
    const Assembled a = run(reply, sizes, make);
    REQUIRE(a.calls.size() == whole.calls.size());
    for (size_t i = 0; i < a.calls.size(); ++i) {
      CHECK(a.calls[i].first == whole.calls[i].name);
      CHECK(parsed(a.calls[i].second) == parsed(whole.calls[i].arguments));
    }
    // The whole-reply parser trims the text around calls; the stream sends it as written.
    std::string trimmed = a.text;
    trimmed.erase(0, trimmed.find_first_not_of(" \n"));
    trimmed.erase(trimmed.find_last_not_of(" \n") + 1);
    CHECK(trimmed == whole.content);
  }
}

}  // namespace

TEST_CASE("hermes reply parser: text and calls add up to the whole-reply parser's, however the reply is cut", "[server][reply]") {
  require_like_whole_parser("It is sunny.");
  require_like_whole_parser("Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2], "
                            "\"note\": \"a \\\"quoted\\\" }, brace\"}}\n</tool_call>");
  require_like_whole_parser("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": "
                            "{\"x\": {\"y\": [true, null, 1.5e3]}}}</tool_call>");
  // Arguments before the name, and arguments written as a string of JSON.
  require_like_whole_parser("<tool_call>{\"arguments\": {\"q\": \"x,y:z\"}, \"name\": \"search\"}</tool_call>");
  require_like_whole_parser("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"n\\\": 3}\"}</tool_call>");
  // A tag whose content is no call stays text.
  require_like_whole_parser("<tool_call>{\"foo\": 1}</tool_call> and more");
}

TEST_CASE("hermes reply parser: arguments stream while the model writes them", "[server][reply]") {
  const std::string head = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
  auto parser = loom::server::hermes_reply_parser();
  std::vector<ReplyEvent> events;
  for (char c : head) parser->feed(std::string_view(&c, 1), events);
  // The call has begun and its arguments so far are out, before the object closed.
  REQUIRE(events.size() >= 2);
  CHECK(events.front().kind == ReplyEvent::Kind::call_begin);
  CHECK(events.front().name == "get_weather");
  std::string arguments;
  for (const ReplyEvent& e : events) {
    CHECK(e.kind != ReplyEvent::Kind::call_end);
    if (e.kind == ReplyEvent::Kind::call_arguments) arguments += e.text;
  }
  CHECK(arguments == "{\"city\": \"Par");
  parser->feed("is\"}}\n</tool_call>", events);
  parser->finish(events);
  CHECK(events.back().kind == ReplyEvent::Kind::call_end);
}

TEST_CASE("hermes reply parser: a possible tag start is held, then sent as text when it is none", "[server][reply]") {
  auto parser = loom::server::hermes_reply_parser();
  std::vector<ReplyEvent> events;
  parser->feed("a < b and x <tool", events);
  std::string sent;
  for (const ReplyEvent& e : events) sent += e.text;
  CHECK(sent == "a < b and x ");
  parser->feed("box", events);
  parser->finish(events);
  sent.clear();
  for (const ReplyEvent& e : events) sent += e.text;
  CHECK(sent == "a < b and x <toolbox");
}

TEST_CASE("call-list reply parsers (Mistral, forced calls) add up to the whole-reply parsers'", "[server][reply]") {
  const auto mistral = [] { return loom::server::call_list_reply_parser("[TOOL_CALLS]"); };
  const auto mistral_whole = [](const std::string& text) {
    return loom::server::parse_tool_calls(text, loom::server::ToolCallFormat::mistral);
  };
  require_like_whole_parser("No tools needed, [TOOL it seems.", mistral, mistral_whole);
  require_like_whole_parser("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
                            "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\", \"fmt\": [\"h\", \"m\"]}}]",
                            mistral, mistral_whole);
  require_like_whole_parser("Checking.[TOOL_CALLS] {\"name\": \"f\", \"arguments\": {}}", mistral, mistral_whole);
  const auto forced = [] { return loom::server::call_list_reply_parser(""); };
  require_like_whole_parser("[{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Paris\"}},{\"name\":\"get_weather\","
                            "\"parameters\":{\"city\":\"Rome, \\\"IT\\\"\"}}]",
                            forced, loom::server::parse_forced_tool_calls);
}

TEST_CASE("the reasoning splitter streams the block as reasoning and the rest through the format's parser", "[server][reply]") {
  using loom::server::kThinkTags;
  for (const bool inside : {false, true}) {
    for (const std::string reply : {"<think>\nLet me think.\n\nDone.\n</think>\n\nThe answer <tool_call>{\"name\": \"f\", "
                                    "\"arguments\": {\"a\": 1}}</tool_call>",
                                    "Two is even.</think>\n\nYes", "Just text, no block", "<think>still thinking\n",
                                    "  \n<think>x</think>y", "<thin", "\n\n"}) {
      const loom::server::SplitReply split = loom::server::split_reasoning(reply, inside, kThinkTags);
      const loom::server::ParsedReply whole = loom::server::parse_tool_calls(split.content, loom::server::ToolCallFormat::hermes);
      const auto make = [&] { return loom::server::reasoning_reply_parser(kThinkTags, inside, loom::server::hermes_reply_parser()); };
      for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{1}, {2}, {3}, {7}, {reply.size() + 1}}) {
        INFO("starts inside: " << inside << ", reply " << reply << ", pieces of " << sizes[0]);
        const Assembled a = run(reply, sizes, make);
        CHECK(a.reasoning == split.reasoning);
        std::string trimmed = a.text;
        trimmed.erase(0, trimmed.find_first_not_of(" \n"));
        trimmed.erase(trimmed.find_last_not_of(" \n") + 1);
        CHECK(trimmed == whole.content);
        REQUIRE(a.calls.size() == whole.calls.size());
        for (size_t i = 0; i < a.calls.size(); ++i) CHECK(parsed(a.calls[i].second) == parsed(whole.calls[i].arguments));
      }
    }
  }
}

TEST_CASE("the Llama 3 reply parser adds up to the whole-reply parser's", "[server][reply]") {
  const auto whole = [](const std::string& text) { return loom::server::parse_tool_calls(text, loom::server::ToolCallFormat::llama3); };
  for (const char* reply : {"The capital of France is Paris.", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                            "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": [1, {\"y\": \";\"}]}}",
                            "  \n{\"name\": \"f\", \"parameters\": {\"s\": \"}{\"}}\n"})
    require_like_whole_parser(reply, loom::server::llama3_reply_parser, whole);
}

TEST_CASE("the harmony reply parser adds up to parse_harmony, however the reply is cut", "[server][reply]") {
  for (const std::string reply :
       {"Plain text, no harmony at all.  ",
        "<|channel|>analysis<|message|>The user asks for the capital.<|start|>assistant<|channel|>final<|message|> Paris. \n",
        "<|channel|>analysis<|message|>Need weather.<|start|>assistant<|channel|>commentary to=functions.get_weather "
        "<|constrain|>json<|message|>{\"city\": \"Oslo\"}",
        "<|channel|>analysis<|message|>One.<|start|>assistant<|channel|>analysis<|message|>  Two.<|start|>assistant<|channel|>"
        "commentary<|message|>Let me check.<|start|>assistant<|channel|>final<|message|>Done.",
        "<|channel|>analysis<|message|>cut off in the middle <|sta"}) {
    const loom::server::HarmonyReply whole = loom::server::parse_harmony(reply);
    for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{1}, {2}, {3}, {5}, {11}, {reply.size()}}) {
      INFO("reply " << reply << " in pieces of " << sizes[0]);
      const Assembled a = run(reply, sizes, loom::server::harmony_reply_parser);
      CHECK(a.reasoning == whole.reasoning);
      CHECK(a.text == whole.content);
      REQUIRE(a.calls.size() == whole.calls.size());
      for (size_t i = 0; i < a.calls.size(); ++i) {
        CHECK(a.calls[i].first == whole.calls[i].name);
        CHECK(a.calls[i].second == whole.calls[i].arguments);
      }
    }
  }
}

TEST_CASE("the Gemma 4 reply parser translates calls to JSON as they are written, like the whole-reply parser", "[server][reply]") {
  const auto whole = [](const std::string& text) { return loom::server::parse_tool_calls(text, loom::server::ToolCallFormat::gemma4); };
  const MakeParser gemma4 = loom::server::gemma4_reply_parser;
  require_like_whole_parser("No call here, <|tool it seems.", gemma4, whole);
  require_like_whole_parser("Let me check.<|tool_call>call:get_weather{city:<|\"|>Paris, \"France\" \u00e9t\u00e9<|\"|>,days:3,metric:true,"
                            "extra:null,spots:[<|\"|>a{b}<|\"|>,2.5],filter:{min:-1},none:[]}<tool_call|><|tool_call>call:ping{}<tool_call|>",
                            gemma4, whole);
  require_like_whole_parser("<|tool_call>call:search{q:<|\"|>line one\nline <two> \u65e5\u672c<|\"|>}<tool_call|>Done.", gemma4, whole);

  // The name goes out when the arguments open, and a string's text before its closing mark.
  auto parser = loom::server::gemma4_reply_parser();
  std::vector<ReplyEvent> events;
  parser->feed("<|tool_call>call:search{q:<|\"|>cats and", events);
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == ReplyEvent::Kind::call_begin);
  CHECK(events[0].name == "search");
  CHECK(events[1].text == "{\"q\":\"cats and");
  parser->feed(" dogs<|\"|>}<tool_call|>", events);
  CHECK(events.back().kind == ReplyEvent::Kind::call_end);
}
