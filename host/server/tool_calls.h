// Function calling on /v1/chat/completions: the `tools`, `tool_choice` and `parallel_tool_calls`
// fields, the messages (with their tool_calls and tool results) as the chat template's context, and
// tool calls parsed back out of the model's text in the format its family was trained on:
//   hermes  <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (Qwen 2.5/3, Hermes, SmolLM3)
//   llama3  {"name": ..., "parameters": {...}}, optionally after <|python_tag|>  (Llama 3.1+)
//   mistral [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]         (Mistral, Ministral)
//   gemma4  <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>     (Gemma 4; tool_calls_gemma4.h)
//   harmony <|channel|>commentary to=functions.NAME ...<|message|>{...}    (gpt-oss; harmony.h)
// tool_choice "required" or a named function is enforced by a grammar instead (vLLM's way): the
// model writes a JSON array of {"name", "parameters"} objects that always parses, whatever its family.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/grammar_constraint.h"

namespace loom::server {

enum class ToolChoice { none, automatic, required, named };
enum class ToolCallFormat { hermes, llama3, mistral, gemma4 };

struct ToolRequest {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as sent (function tools only)
  ToolChoice choice = ToolChoice::automatic;
  std::string named;           // ToolChoice::named: the function's name
  bool parallel = true;        // parallel_tool_calls
};

struct ToolCall {
  std::string id;         // call_<random>
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedReply {
  std::string content;           // the text outside the calls (may be empty)
  std::vector<ToolCall> calls;
};

// The body's tools and tool_choice; nullopt when no tools were given. ApiError 400 naming the field
// for a tool without a name, a non-function tool, an unknown tool_choice or a named one not in tools.
std::optional<ToolRequest> parse_tool_request(const nlohmann::ordered_json& body);

// The chat template's variables: the messages as sent (tool_calls' string arguments turned into
// objects, as the published templates expect), the tools unless tool_choice is "none".
nlohmann::ordered_json template_context(const nlohmann::ordered_json& body, const std::optional<ToolRequest>& tools);

// For a chat template that knows nothing of tools (Gemma 3's: no tool role, assistant content always
// a string): the context's tool traffic as plain turns it can render. An assistant's calls become the
// JSON list a forced call writes ([{"name", "parameters"}]), each tool result a user turn naming its
// tool, and consecutive user turns are merged so the roles still alternate.
bool template_handles_tools(const std::string& template_source);
nlohmann::ordered_json tool_turns_as_text(const nlohmann::ordered_json& context);

// The family's format, from what its chat template writes.
ToolCallFormat tool_call_format(const std::string& template_source);

// Tool calls in a whole reply written in `format`; text that only looks like a call (invalid JSON, no
// name) stays content. The server reads replies incrementally (reply_stream.h); these whole-reply
// readers are the reference the incremental parsers are tested against.
ParsedReply parse_tool_calls(const std::string& text, ToolCallFormat format);

// A fresh OpenAI-style call id (call_ and 24 random characters).
std::string new_call_id();

// tool_choice required / named: the grammar of the reply, and its reading.
GrammarSpec forced_tool_call_grammar(const ToolRequest& tools);
ParsedReply parse_forced_tool_calls(const std::string& text);

}  // namespace loom::server
