#include "server/tool_calls.h"

#include <map>
#include <random>

#include "common/error.h"
#include "engine/image_prompt.h"
#include "engine/json_schema_strict.h"
#include "server/api_error.h"
#include "server/tool_calls_gemma4.h"

namespace loom::server {

namespace {

using json = nlohmann::ordered_json;

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += digits[rng() % 36];
  return id;
}

// A JSON value starting at text[pos] (after whitespace): its end, or npos when none parses there.
size_t json_value_end(const std::string& text, size_t pos, json& out) {
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos >= text.size() || (text[pos] != '{' && text[pos] != '[')) return std::string::npos;
  // Try each closing bracket in turn: the first prefix that parses is the value.
  const char close = text[pos] == '{' ? '}' : ']';
  for (size_t end = text.find(close, pos); end != std::string::npos; end = text.find(close, end + 1)) {
    json value = json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos), text.begin() + static_cast<std::ptrdiff_t>(end) + 1,
                             nullptr, false);
    if (!value.is_discarded()) {
      out = std::move(value);
      return end + 1;
    }
  }
  return std::string::npos;
}

// {"name": ..., "arguments"|"parameters": {...}} as a call; nullopt when it is not one.
std::optional<ToolCall> call_from(const json& object) {
  if (!object.is_object()) return std::nullopt;
  auto name = object.find("name");
  if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  json arguments = json::object();
  for (const char* key : {"arguments", "parameters"}) {
    auto it = object.find(key);
    if (it == object.end()) continue;
    arguments = *it;
    if (arguments.is_string()) arguments = json::parse(arguments.get<std::string>(), nullptr, false);
    break;
  }
  if (!arguments.is_object()) return std::nullopt;
  return ToolCall{call_id(), name->get<std::string>(), arguments.dump()};
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

ParsedReply parse_hermes(const std::string& text) {
  ParsedReply reply;
  const std::string open = "<tool_call>", close = "</tool_call>";
  size_t pos = 0;
  while (true) {
    const size_t start = text.find(open, pos);
    if (start == std::string::npos) break;
    json value;
    const size_t end = json_value_end(text, start + open.size(), value);
    const auto call = end == std::string::npos ? std::nullopt : call_from(value);
    if (!call) break;
    reply.content += text.substr(pos, start - pos);
    reply.calls.push_back(*call);
    const size_t closing = text.find(close, end);
    pos = closing == std::string::npos ? text.size() : closing + close.size();
  }
  reply.content = trim(reply.content + text.substr(pos));
  return reply;
}

ParsedReply parse_llama3(const std::string& text) {
  std::string body = trim(text);
  const std::string tag = "<|python_tag|>";
  if (body.rfind(tag, 0) == 0) body = trim(body.substr(tag.size()));
  // One call, or several separated by ';', each a whole JSON object.
  ParsedReply reply;
  size_t pos = 0;
  while (pos < body.size()) {
    json value;
    const size_t end = json_value_end(body, pos, value);
    const auto call = end == std::string::npos ? std::nullopt : call_from(value);
    if (!call) return {trim(text), {}};
    reply.calls.push_back(*call);
    pos = end;
    while (pos < body.size() && (std::isspace(static_cast<unsigned char>(body[pos])) || body[pos] == ';')) ++pos;
  }
  if (reply.calls.empty()) return {trim(text), {}};
  return reply;
}

ParsedReply parse_mistral(const std::string& text) {
  const std::string tag = "[TOOL_CALLS]";
  const size_t start = text.find(tag);
  if (start == std::string::npos) return {trim(text), {}};
  json value;
  const size_t end = json_value_end(text, start + tag.size(), value);
  if (end == std::string::npos) return {trim(text), {}};
  ParsedReply reply;
  for (const json& item : value.is_array() ? value : json::array({value})) {
    const auto call = call_from(item);
    if (!call) return {trim(text), {}};
    reply.calls.push_back(*call);
  }
  reply.content = trim(text.substr(0, start) + text.substr(end));
  return reply;
}

}  // namespace

std::string new_call_id() { return call_id(); }

std::optional<ToolRequest> parse_tool_request(const json& body) {
  auto tools_it = body.find("tools");
  const bool has_tools = tools_it != body.end() && !tools_it->is_null() && !(tools_it->is_array() && tools_it->empty());
  auto choice_it = body.find("tool_choice");
  const bool has_choice = choice_it != body.end() && !choice_it->is_null();
  if (!has_tools) {
    if (has_choice && !(choice_it->is_string() && (*choice_it == "none" || *choice_it == "auto"))) {
      throw invalid_param("tool_choice", "'tool_choice' asks for a tool call but no 'tools' were given");
    }
    return std::nullopt;
  }
  if (!tools_it->is_array()) throw invalid_param("tools", "'tools' must be an array of tools");
  ToolRequest request;
  for (size_t i = 0; i < tools_it->size(); ++i) {
    const json& tool = (*tools_it)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw invalid_param(where, "'" + where + "' must be an object");
    auto type = tool.find("type");
    if (type == tool.end() || *type != "function") throw invalid_param(where + ".type", "only tools of type 'function' are supported");
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) throw invalid_param(where + ".function", "'" + where + ".function' must be an object");
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get<std::string>().empty()) {
      throw invalid_param(where + ".function.name", "every tool needs a non-empty 'function.name'");
    }
    auto parameters = function->find("parameters");
    if (parameters != function->end() && !parameters->is_null() && !parameters->is_object()) {
      throw invalid_param(where + ".function.parameters", "'" + where + ".function.parameters' must be a JSON schema object");
    }
    request.tools.push_back(tool);
  }
  if (has_choice) {
    if (choice_it->is_string()) {
      const std::string c = choice_it->get<std::string>();
      if (c == "none") request.choice = ToolChoice::none;
      else if (c == "auto") request.choice = ToolChoice::automatic;
      else if (c == "required") request.choice = ToolChoice::required;
      else throw invalid_param("tool_choice", "'tool_choice' is '" + c + "'; allowed: 'none', 'auto', 'required' or a named function");
    } else if (choice_it->is_object()) {
      auto function = choice_it->find("function");
      auto name = function == choice_it->end() || !function->is_object() ? choice_it->end() : function->find("name");
      if (function == choice_it->end() || !function->is_object() || name == function->end() || !name->is_string()) {
        throw invalid_param("tool_choice", "a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      request.choice = ToolChoice::named;
      request.named = name->get<std::string>();
      bool known = false;
      for (const json& tool : request.tools) known = known || tool["function"]["name"] == request.named;
      if (!known) throw invalid_param("tool_choice", "'tool_choice' names '" + request.named + "', which is not in 'tools'");
    } else {
      throw invalid_param("tool_choice", "'tool_choice' must be a string or an object");
    }
  }
  auto parallel = body.find("parallel_tool_calls");
  if (parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) throw invalid_param("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    request.parallel = parallel->get<bool>();
  }
  return request;
}

json template_context(const json& body, const std::optional<ToolRequest>& tools) {
  json messages = json::array();
  for (const json& m : body.at("messages")) {
    json message = m;
    if (message.contains("role") && message["role"] == "developer") message["role"] = "system";
    auto content = message.find("content");
    if (content != message.end() && content->is_array()) {  // text parts joined, as the prompt path does
      std::string text;
      for (const json& part : *content) {
        if (!part.is_object()) continue;
        const std::string type = part.value("type", "");
        if (type == "text") text += part.value("text", "");
        if (type == "image_url" || type == "input_image" || type == "image") text += private_image_marker();  // openai_parse's marker
      }
      *content = text;
    }
    auto calls = message.find("tool_calls");
    if (calls != message.end() && calls->is_array()) {
      for (json& call : *calls) {
        auto function = call.find("function");
        if (function == call.end() || !function->is_object()) continue;
        auto arguments = function->find("arguments");
        if (arguments != function->end() && arguments->is_string()) {
          json parsed = json::parse(arguments->get<std::string>(), nullptr, false);
          if (!parsed.is_discarded()) *arguments = std::move(parsed);
        }
      }
    }
    messages.push_back(std::move(message));
  }
  json context = {{"messages", std::move(messages)}};
  if (tools && tools->choice != ToolChoice::none) context["tools"] = tools->tools;
  return context;
}

bool template_handles_tools(const std::string& source) { return source.find("tool") != std::string::npos; }

json tool_turns_as_text(const json& context) {
  auto messages_in = context.find("messages");
  if (messages_in == context.end() || !messages_in->is_array()) return context;
  std::map<std::string, std::string> tool_names;  // call id -> function name
  json messages = json::array();
  for (const json& original : *messages_in) {
    json message = original;
    const std::string role = message.value("role", "");
    auto text_of = [](const json& content) { return content.is_string() ? content.get<std::string>() : content.is_null() ? "" : content.dump(); };
    auto calls = message.find("tool_calls");
    if (role == "assistant" && calls != message.end() && calls->is_array() && !calls->empty()) {
      json list = json::array();
      for (const json& call : *calls) {
        const json function = call.value("function", json::object());
        list.push_back({{"name", function.value("name", "")}, {"parameters", function.value("arguments", json::object())}});
        tool_names[call.value("id", "")] = function.value("name", "");
      }
      const std::string text = text_of(message.value("content", json()));
      message["content"] = text.empty() ? list.dump() : text + "\n" + list.dump();
      message.erase("tool_calls");
    } else if (role == "tool") {
      const std::string name = tool_names[message.value("tool_call_id", "")];
      message = {{"role", "user"}, {"content", "Result of " + (name.empty() ? std::string("the tool") : name) + ": " +
                                                   text_of(message.value("content", json()))}};
    } else if (message.contains("content")) {
      message["content"] = text_of(message["content"]);
    }
    if (!messages.empty() && messages.back().value("role", "") == "user" && message.value("role", "") == "user") {
      messages.back()["content"] = messages.back()["content"].get<std::string>() + "\n\n" + message["content"].get<std::string>();
    } else {
      messages.push_back(std::move(message));
    }
  }
  json out = context;
  out["messages"] = std::move(messages);
  return out;
}

ToolCallFormat tool_call_format(const std::string& source) {
  if (source.find("<|tool_call>") != std::string::npos) return ToolCallFormat::gemma4;
  if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallFormat::mistral;
  if (source.find("<tool_call>") != std::string::npos) return ToolCallFormat::hermes;
  if (source.find("<|python_tag|>") != std::string::npos || source.find("ipython") != std::string::npos) return ToolCallFormat::llama3;
  return ToolCallFormat::hermes;  // the most common format among models without a marker of their own
}

ParsedReply parse_tool_calls(const std::string& text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::mistral: return parse_mistral(text);
    case ToolCallFormat::llama3: return parse_llama3(text);
    case ToolCallFormat::gemma4: {
      const auto parsed = parse_gemma4_tool_calls(text);
      if (!parsed) return {trim(text), {}};
      ParsedReply reply{trim(parsed->content), {}};
      for (const auto& call : parsed->calls) reply.calls.push_back({call_id(), call.name, call.arguments.dump()});
      return reply;
    }
    case ToolCallFormat::hermes: break;
  }
  return parse_hermes(text);
}

GrammarSpec forced_tool_call_grammar(const ToolRequest& request) {
  json variants = json::array();
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const json& function = request.tools[i]["function"];
    if (request.choice == ToolChoice::named && function["name"] != request.named) continue;
    json parameters = function.contains("parameters") && function["parameters"].is_object() ? function["parameters"]
                                                                                           : json{{"type", "object"}};
    // A strict function's parameters must be enforced keyword by keyword (json_schema_strict.h).
    if (function.contains("strict") && function["strict"] == true) {
      const std::string field = "tools[" + std::to_string(i) + "].function.parameters";
      try {
        parameters = json::parse(prepare_strict_schema(parameters.dump()));
      } catch (const Error& e) {
        throw invalid_param(field, "'" + field + "': " + e.what());
      }
    }
    variants.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", function["name"]}}}, {"parameters", parameters}}},
                        {"required", {"name", "parameters"}},
                        {"additionalProperties", false}});
  }
  json items = variants.size() == 1 ? variants[0] : json{{"anyOf", variants}};
  json schema = {{"type", "array"}, {"items", items}, {"minItems", 1}};
  // A named function is called once (vLLM's reading, and what OpenAI's and Anthropic's forced choice
  // returns): a small model told to call it otherwise repeats the call until the tokens run out.
  if (!request.parallel || request.choice == ToolChoice::named) schema["maxItems"] = 1;
  return GrammarSpec{GrammarSpec::Kind::json_schema, schema.dump(), {}};
}

ParsedReply parse_forced_tool_calls(const std::string& text) {
  const json value = json::parse(text, nullptr, false);
  ParsedReply reply;
  if (!value.is_array()) return {text, {}};
  for (const json& item : value) {
    const auto call = call_from(item);
    if (!call) return {text, {}};
    reply.calls.push_back(*call);
  }
  return reply;
}

}  // namespace loom::server
