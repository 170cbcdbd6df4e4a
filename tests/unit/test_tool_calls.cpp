// Tool calls read back out of model text in each family's format, and the tool fields' validation.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

using loom::server::ParsedReply;
using loom::server::ToolCallFormat;
using json = nlohmann::ordered_json;

namespace {

json args_of(const ParsedReply& reply, size_t i) { return json::parse(reply.calls.at(i).arguments); }

}  // namespace

TEST_CASE("tool calls: Hermes/Qwen <tool_call> blocks, text around them kept as content", "[tools]") {
  const auto reply = loom::server::parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>",
      ToolCallFormat::hermes);
  REQUIRE(reply.calls.size() == 2);
  CHECK(reply.calls[0].name == "get_weather");
  CHECK(args_of(reply, 0) == json{{"city", "Paris"}});
  CHECK(reply.calls[1].name == "get_time");
  CHECK(reply.content == "Let me check.");
  CHECK(reply.calls[0].id.rfind("call_", 0) == 0);
  CHECK(reply.calls[0].id != reply.calls[1].id);
  // Something that only looks like a call stays text.
  const auto broken = loom::server::parse_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": {oops}</tool_call>", ToolCallFormat::hermes);
  CHECK(broken.calls.empty());
  CHECK(broken.content.find("oops") != std::string::npos);
  CHECK(loom::server::parse_tool_calls("Just an answer.", ToolCallFormat::hermes).calls.empty());
}

TEST_CASE("tool calls: Llama 3.x JSON with parameters, after <|python_tag|> or alone", "[tools]") {
  auto reply = loom::server::parse_tool_calls("{\"name\": \"search\", \"parameters\": {\"q\": \"loom\"}}", ToolCallFormat::llama3);
  REQUIRE(reply.calls.size() == 1);
  CHECK(args_of(reply, 0) == json{{"q", "loom"}});
  reply = loom::server::parse_tool_calls("<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}",
                                         ToolCallFormat::llama3);
  REQUIRE(reply.calls.size() == 2);
  CHECK(reply.calls[1].name == "b");
  CHECK(loom::server::parse_tool_calls("The answer is {42}.", ToolCallFormat::llama3).calls.empty());
}

TEST_CASE("tool calls: Mistral [TOOL_CALLS] list, arguments given as a string or an object", "[tools]") {
  const auto reply = loom::server::parse_tool_calls(
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": \"{\\\"b\\\": 2}\"}]",
      ToolCallFormat::mistral);
  REQUIRE(reply.calls.size() == 2);
  CHECK(args_of(reply, 1) == json{{"b", 2}});
  CHECK(reply.content.empty());
}

TEST_CASE("tool calls: the family's format comes from its template, forced calls from a JSON list", "[tools]") {
  CHECK(loom::server::tool_call_format("... [TOOL_CALLS] ...") == ToolCallFormat::mistral);
  CHECK(loom::server::tool_call_format("<tool_call>") == ToolCallFormat::hermes);
  CHECK(loom::server::tool_call_format("<|python_tag|> ipython") == ToolCallFormat::llama3);
  const auto forced = loom::server::parse_forced_tool_calls("[{\"name\": \"f\", \"parameters\": {\"x\": true}}]");
  REQUIRE(forced.calls.size() == 1);
  CHECK(args_of(forced, 0) == json{{"x", true}});
}

TEST_CASE("tool calls: tools and tool_choice are validated by name", "[tools]") {
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}};
  auto request = loom::server::parse_tool_request(json{{"tools", {tool}}, {"tool_choice", "required"}, {"parallel_tool_calls", false}});
  REQUIRE(request);
  CHECK(request->choice == loom::server::ToolChoice::required);
  CHECK_FALSE(request->parallel);
  const auto grammar = loom::server::forced_tool_call_grammar(*request);
  CHECK(json::parse(grammar.text)["maxItems"] == 1);
  auto refused_at = [](const json& body) {
    try {
      loom::server::parse_tool_request(body);
    } catch (const loom::server::ApiError& e) {
      return e.param().value_or("(none)");
    }
    return std::string("(accepted)");
  };
  CHECK(refused_at(json{{"tools", {{{"type", "function"}, {"function", {{"description", "no name"}}}}}}}) == "tools[0].function.name");
  CHECK(refused_at(json{{"tools", {tool}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}) == "tool_choice");
  CHECK(refused_at(json{{"tool_choice", "required"}}) == "tool_choice");
  CHECK(refused_at(json{{"tools", {{{"type", "retrieval"}}}}}) == "tools[0].type");
  CHECK_FALSE(loom::server::parse_tool_request(json{{"tool_choice", "auto"}}));
}

TEST_CASE("reasoning: <think> split from the answer, opened by the reply or by the prompt", "[tools][reasoning]") {
  using loom::server::split_reasoning;
  auto s = split_reasoning("<think>\nPlan it.\n</think>\n\nThe answer.", false);
  CHECK(s.reasoning == "Plan it.");
  CHECK(s.content == "The answer.");
  CHECK(s.closed);
  s = split_reasoning("Plan it.</think>The answer.", true);  // DeepSeek-R1: the prompt opened <think>
  CHECK(s.reasoning == "Plan it.");
  CHECK(s.content == "The answer.");
  s = split_reasoning("Still pondering", true);  // cut off by max_tokens
  CHECK(s.reasoning == "Still pondering");
  CHECK(s.content.empty());
  CHECK_FALSE(s.closed);
  s = split_reasoning("No thinking here.", false);
  CHECK(s.content == "No thinking here.");
  CHECK(s.reasoning.empty());
  CHECK(loom::server::prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  CHECK_FALSE(loom::server::prompt_opens_reasoning("<think>\n\n</think>\n\n"));
}

TEST_CASE("tool calls: Gemma 4 <|tool_call>call:NAME{...} blocks, strings in <|\"|>", "[tools]") {
  const std::string text =
      "Let me check.<|tool_call>call:get_weather{city:<|\"|>Paris, France<|\"|>,days:3,metric:true,"
      "extra:null,spots:[<|\"|>a{b}<|\"|>,2.5],filter:{min:-1}}<tool_call|><|tool_call>call:ping{}<tool_call|>";
  const auto reply = loom::server::parse_tool_calls(text, ToolCallFormat::gemma4);
  REQUIRE(reply.calls.size() == 2);
  CHECK(reply.calls[0].name == "get_weather");
  CHECK(args_of(reply, 0) == json::parse(R"({"city": "Paris, France", "days": 3, "metric": true, "extra": null,
                                               "spots": ["a{b}", 2.5], "filter": {"min": -1}})"));
  CHECK(reply.calls[1].name == "ping");
  CHECK(args_of(reply, 1) == json::object());
  CHECK(reply.content == "Let me check.");
  // A block that does not parse leaves the text as content.
  const auto broken = loom::server::parse_tool_calls("<|tool_call>call:f{a:<|\"|>open}<tool_call|>", ToolCallFormat::gemma4);
  CHECK(broken.calls.empty());
  CHECK(loom::server::tool_call_format("{{- '<|tool_call>call:' + function['name'] + '{' -}}") == ToolCallFormat::gemma4);
}

TEST_CASE("tool calls: what Gemma 4's published template writes for a call parses back to the same arguments", "[tools]") {
  const auto path = std::filesystem::path(std::getenv("HOME") ? std::getenv("HOME") : "") / ".cache/loom/templates" /
                    "google-gemma-4-31B-it.jinja";
  if (!std::filesystem::exists(path)) {
    WARN(path.string() << " is absent (scripts/setup.sh fetches llama.cpp's templates); skipping");
    return;
  }
  std::ifstream in(path);
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto tmpl = loom::chat::ChatTemplate::parse(source);
  const json arguments = json::parse(R"({"city": "Paris, France", "days": 3, "metric": true, "ratio": 0.5,
                                        "spots": ["a{b}", "c"], "filter": {"min": -1, "tags": ["x"]}})");
  json context = {{"messages", json::array({{{"role", "user"}, {"content", "Weather?"}},
                                            {{"role", "assistant"},
                                             {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                                          {"function", {{"name", "get_weather"},
                                                                                        {"arguments", arguments}}}}})}}})},
                  {"bos_token", "<bos>"}, {"add_generation_prompt", false}};
  const std::string rendered = tmpl.render(context);
  const size_t start = rendered.find("<|tool_call>");
  REQUIRE(start != std::string::npos);
  const size_t end = rendered.find("<tool_call|>", start);
  REQUIRE(end != std::string::npos);
  const std::string block = rendered.substr(start, end + 12 - start);
  INFO("template wrote: " << block);
  const auto reply = loom::server::parse_tool_calls(block, ToolCallFormat::gemma4);
  REQUIRE(reply.calls.size() == 1);
  CHECK(reply.calls[0].name == "get_weather");
  CHECK(nlohmann::json::parse(reply.calls[0].arguments) == nlohmann::json::parse(arguments.dump()));
}

TEST_CASE("reasoning: Gemma 4's <|channel>thought block, tags chosen by the template", "[tools][reasoning]") {
  using loom::server::kGemma4Tags;
  CHECK(loom::server::reasoning_tags("{{- '<|channel>thought\\n' + t + '\\n<channel|>' -}}").close == kGemma4Tags.close);
  CHECK(loom::server::reasoning_tags("<think>").close == loom::server::kThinkTags.close);
  auto s = loom::server::split_reasoning("<|channel>thought\nCheck units.<channel|>It is 4 km.", false, kGemma4Tags);
  CHECK(s.reasoning == "Check units.");
  CHECK(s.content == "It is 4 km.");
  CHECK(loom::server::split_reasoning("Plain answer.", false, kGemma4Tags).content == "Plain answer.");
}

TEST_CASE("tool calls: a template without tools gets the round trip as plain alternating turns", "[tools]") {
  // Gemma 3's template: no tool role, and content must be a string.
  CHECK_FALSE(loom::server::template_handles_tools("{% for m in messages %}{{ m['content'] | trim }}{% endfor %}"));
  CHECK(loom::server::template_handles_tools("{% if message.tool_calls %}...{% endif %}"));
  const json context = json::parse(R"({"messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"celsius\": -3}"},
    {"role": "user", "content": "And tomorrow?"}], "tools": []})");
  const json out = loom::server::tool_turns_as_text(context);
  REQUIRE(out["messages"].size() == 3);
  CHECK(out["messages"][0] == context["messages"][0]);
  CHECK(out["messages"][1]["role"] == "assistant");
  CHECK(json::parse(out["messages"][1]["content"].get<std::string>()) ==
        json::parse(R"([{"name": "get_weather", "parameters": {"city": "Oslo"}}])"));
  CHECK_FALSE(out["messages"][1].contains("tool_calls"));
  CHECK(out["messages"][2] == json::parse(R"({"role": "user", "content": "Result of get_weather: {\"celsius\": -3}\n\nAnd tomorrow?"})"));
  CHECK(out.contains("tools"));
}
