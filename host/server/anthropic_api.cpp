#include "server/anthropic_api.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/http_util.h"
#include "server/openai_format.h"
#include "server/openai_parse.h"
#include "server/sse_stream.h"
#include "server/whole_answer.h"

namespace loom::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// ---------- the request: Anthropic's body as a chat request ----------

ApiError bad(const std::string& where, const std::string& message) { return ApiError(400, where + ": " + message, where); }

// A system prompt or a tool result: a string, or text blocks joined.
std::string text_of(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad(where, "must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& block = content[i];
    if (!block.is_object() || block.value("type", "") != "text" || !block.contains("text") || !block["text"].is_string())
      throw bad(where + "." + std::to_string(i), "must be a text block ({\"type\": \"text\", \"text\": ...})");
    text += (text.empty() ? "" : "\n") + block["text"].get<std::string>();
  }
  return text;
}

ordered_json image_part(const json& block, const std::string& where) {
  const json source = block.value("source", json::object());
  const std::string type = source.value("type", "");
  if (type == "base64" && source.contains("data") && source.contains("media_type"))
    return {{"type", "image_url"}, {"image_url", {{"url", "data:" + source["media_type"].get<std::string>() + ";base64," + source["data"].get<std::string>()}}}};
  if (type == "url" && source.contains("url")) return {{"type", "image_url"}, {"image_url", {{"url", source["url"]}}}};
  throw bad(where + ".source", "must be {\"type\": \"base64\", \"media_type\", \"data\"} or {\"type\": \"url\", \"url\"}");
}

// One Anthropic message as chat messages: a user turn's tool results become tool messages (before
// its text), an assistant turn's tool_use blocks its tool_calls.
void add_message(const json& message, size_t index, ordered_json& out) {
  const std::string where = "messages." + std::to_string(index);
  if (!message.is_object()) throw bad(where, "must be an object with role and content");
  const std::string role = message.value("role", "");
  if (role != "user" && role != "assistant") throw bad(where + ".role", "must be \"user\" or \"assistant\"");
  if (!message.contains("content")) throw bad(where + ".content", "Field required");
  const json& content = message["content"];
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content}});
    return;
  }
  if (!content.is_array()) throw bad(where + ".content", "must be a string or an array of content blocks");
  ordered_json parts = ordered_json::array(), calls = ordered_json::array();
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& block = content[i];
    const std::string at = where + ".content." + std::to_string(i);
    const std::string type = block.is_object() ? block.value("type", "") : "";
    if (type == "text") {
      if (!block.contains("text") || !block["text"].is_string()) throw bad(at + ".text", "must be a string");
      text += block["text"].get<std::string>();
      parts.push_back({{"type", "text"}, {"text", block["text"]}});
    } else if (type == "image" && role == "user") {
      parts.push_back(image_part(block, at));
    } else if (type == "tool_result" && role == "user") {
      if (!block.contains("tool_use_id") || !block["tool_use_id"].is_string()) throw bad(at + ".tool_use_id", "must be a string");
      std::string result = block.contains("content") ? text_of(block["content"], at + ".content") : "";
      if (block.value("is_error", false)) result = "Error: " + result;
      out.push_back({{"role", "tool"}, {"tool_call_id", block["tool_use_id"]}, {"content", result}});
    } else if (type == "tool_use" && role == "assistant") {
      if (!block.contains("id") || !block.contains("name") || !block["name"].is_string()) throw bad(at, "a tool_use block needs id, name and input");
      calls.push_back({{"id", block["id"]}, {"type", "function"},
                       {"function", {{"name", block["name"]}, {"arguments", block.value("input", json::object()).dump()}}}});
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Earlier reasoning: templates drop it from history, as they drop reasoning_content.
    } else {
      throw bad(at + ".type", "\"" + type + "\" is not a content block this server reads in a " + role +
                                  " message (text, image, tool_result; assistant: text, tool_use, thinking)");
    }
  }
  if (role == "assistant") {
    ordered_json turn = {{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? ordered_json(nullptr) : ordered_json(text)}};
    if (!calls.empty()) turn["tool_calls"] = calls;
    out.push_back(turn);
  } else if (!parts.empty()) {
    out.push_back({{"role", "user"}, {"content", parts}});
  }
}

ordered_json tool_choice_of(const json& choice, ordered_json& chat) {
  const std::string type = choice.is_object() ? choice.value("type", "") : "";
  if (choice.is_object() && choice.value("disable_parallel_tool_use", false)) chat["parallel_tool_calls"] = false;
  if (type == "auto") return "auto";
  if (type == "any") return "required";
  if (type == "none") return "none";
  if (type == "tool" && choice.contains("name") && choice["name"].is_string())
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  throw bad("tool_choice", "must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"none\"} or {\"type\": \"tool\", \"name\"}");
}

// The body as /v1/chat/completions would take it. `need_max_tokens`: /v1/messages requires it,
// count_tokens does not.
ordered_json chat_request(const json& body, bool need_max_tokens) {
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  if (!body.contains("model") || !body["model"].is_string()) throw bad("model", "Field required (a string)");
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    throw bad("messages", "Field required (a non-empty array)");
  ordered_json chat = {{"model", body["model"]}};
  if (need_max_tokens) {
    if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1)
      throw bad("max_tokens", "Field required (an integer >= 1)");
    chat["max_tokens"] = body["max_tokens"];
  }
  // Anthropic's sampling fields, and the extensions llama.cpp and vLLM users send the same way.
  for (const char* key : {"temperature", "top_p", "stream"}) {
    if (body.contains(key)) chat[key] = body[key];
  }
  for (const std::string& key : extension_fields()) {
    if (body.contains(key)) chat[key] = body[key];
  }
  if (body.contains("stop_sequences")) chat["stop"] = body["stop_sequences"];
  ordered_json messages = ordered_json::array();
  if (body.contains("system")) messages.push_back({{"role", "system"}, {"content", text_of(body["system"], "system")}});
  for (size_t i = 0; i < body["messages"].size(); ++i) add_message(body["messages"][i], i, messages);
  chat["messages"] = messages;
  if (body.contains("tools")) {
    if (!body["tools"].is_array()) throw bad("tools", "must be an array");
    ordered_json tools = ordered_json::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const json& tool = body["tools"][i];
      if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string())
        throw bad("tools." + std::to_string(i), "a tool needs a name and an input_schema");
      ordered_json function = {{"name", tool["name"]}, {"parameters", tool.value("input_schema", json{{"type", "object"}})}};
      if (tool.contains("description")) function["description"] = tool["description"];
      tools.push_back({{"type", "function"}, {"function", function}});
    }
    chat["tools"] = tools;
  }
  if (body.contains("tool_choice")) chat["tool_choice"] = tool_choice_of(body["tool_choice"], chat);
  // Extended thinking maps to the chat template's switch (Qwen 3's enable_thinking).
  if (body.contains("thinking") && body["thinking"].is_object()) {
    const std::string type = body["thinking"].value("type", "");
    if (type == "enabled" || type == "disabled") chat["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
  }
  return chat;
}

// ---------- the reply: chat results as Anthropic's blocks ----------

std::string stop_reason(const json& finish) {
  const std::string f = finish.is_string() ? finish.get<std::string>() : "stop";
  if (f == "length") return "max_tokens";
  if (f == "tool_calls") return "tool_use";
  return "end_turn";
}

json tool_input(const json& arguments) {
  if (!arguments.is_string()) return json::object();
  try {
    return json::parse(arguments.get<std::string>());
  } catch (const json::parse_error&) {
    return json::object();
  }
}

json usage_of(GenerationJob& job) {
  const Usage usage = job.usage();
  return {{"input_tokens", usage.prompt_tokens - usage.cached_tokens}, {"output_tokens", usage.completion_tokens},
          {"cache_read_input_tokens", usage.cached_tokens}, {"cache_creation_input_tokens", 0}};
}

json message_of(GenerationJob& job) {
  const json chat = chat_response(job);
  const json& choice = chat["choices"][0];
  const json& message = choice["message"];
  json content = json::array();
  if (message.contains("reasoning_content") && message["reasoning_content"].is_string() && !message["reasoning_content"].get<std::string>().empty())
    content.push_back({{"type", "thinking"}, {"thinking", message["reasoning_content"]}, {"signature", ""}});
  if (message["content"].is_string() && !message["content"].get<std::string>().empty())
    content.push_back({{"type", "text"}, {"text", message["content"]}});
  if (message.contains("tool_calls")) {
    for (const json& call : message["tool_calls"])
      content.push_back({{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]}, {"input", tool_input(call["function"]["arguments"])}});
  }
  return {{"id", "msg_" + job.id()}, {"type", "message"},          {"role", "assistant"},           {"model", chat["model"]},
          {"content", content},      {"stop_reason", stop_reason(choice["finish_reason"])}, {"stop_sequence", nullptr},
          {"usage", usage_of(job)}};
}

std::string sse_event(const std::string& type, const json& data) { return "event: " + type + "\n" + sse_data(dump_json(data)); }

// The chat stream's deltas (reasoning, text, calls) as Anthropic's block events: each kind of delta
// opens its own block, closing the one before.
class AnthropicFormat : public StreamFormat {
 public:
  std::string start(GenerationJob& job) override {
    const size_t n_prompt = job.prompts().front().tokens.size();
    return sse_event("message_start", {{"type", "message_start"},
                                       {"message", {{"id", "msg_" + job.id()}, {"type", "message"}, {"role", "assistant"},
                                                    {"model", job.state().model_name}, {"content", json::array()},
                                                    {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                                    {"usage", {{"input_tokens", n_prompt}, {"output_tokens", 0}}}}}});
  }

  std::string event(GenerationJob& job, const ChoiceEvent& ce) override {
    std::string out;
    for (const json& chunk : stream_chunks(job, ce)) {
      for (const json& choice : chunk["choices"]) {
        const json& delta = choice["delta"];
        if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string() && !delta["reasoning_content"].get<std::string>().empty()) {
          out += open(Block::thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
          out += block_delta({{"type", "thinking_delta"}, {"thinking", delta["reasoning_content"]}});
        }
        if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
          out += open(Block::text, {{"type", "text"}, {"text", ""}});
          out += block_delta({{"type", "text_delta"}, {"text", delta["content"]}});
        }
        if (delta.contains("tool_calls")) {
          for (const json& call : delta["tool_calls"]) {
            if (call.contains("id")) {
              out += close();
              out += open(Block::tool, {{"type", "tool_use"}, {"id", call["id"]}, {"name", call["function"]["name"]}, {"input", json::object()}});
            }
            // The arguments' pieces as the model writes them: the client joins them into the input.
            const json arguments = call.contains("function") ? call["function"].value("arguments", json("")) : json("");
            if (arguments.is_string() && !arguments.get<std::string>().empty())
              out += block_delta({{"type", "input_json_delta"}, {"partial_json", arguments}});
          }
        }
        if (!choice["finish_reason"].is_null()) stop_reason_ = stop_reason(choice["finish_reason"]);
      }
    }
    return out;
  }

  std::string finish(GenerationJob& job) override {
    std::string out = close();
    out += sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", nullptr}}},
                                       {"usage", {{"output_tokens", job.usage().completion_tokens}}}});
    return out + sse_event("message_stop", {{"type", "message_stop"}});
  }

  std::string failure(GenerationJob&, const ApiError& error) override {
    return sse_event("error", {{"type", "error"}, {"error", {{"type", error.status() == 503 ? "overloaded_error" : "api_error"}, {"message", error.what()}}}});
  }

 private:
  enum class Block { none, thinking, text, tool };

  std::string open(Block kind, const json& content_block) {
    if (block_ == kind && kind != Block::tool) return "";
    std::string out = close();
    block_ = kind;
    ++index_;
    return out + sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", content_block}});
  }
  std::string close() {
    if (block_ == Block::none) return "";
    block_ = Block::none;
    return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  std::string block_delta(const json& delta) {
    return sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }

  Block block_ = Block::none;
  int index_ = -1;
  std::string stop_reason_ = "end_turn";
};

// Anthropic's error types by status.
const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

void send_anthropic_error(httplib::Response& res, const ApiError& error) {
  if (error.retry_after() > 0) res.set_header("Retry-After", std::to_string(error.retry_after()));
  send_json(res, error.status(), {{"type", "error"}, {"error", {{"type", error_type(error.status())}, {"message", error.what()}}}});
}

namespace {

// guarded(), with Anthropic's error shape.
template <typename Fn>
httplib::Server::Handler anthropic_guarded(Fn fn) {
  return [fn](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const ApiError& e) {
      send_anthropic_error(res, e);
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
      send_anthropic_error(res, ApiError(400, std::string("a field has the wrong type: ") + e.what()));
    } catch (const Error& e) {
      send_anthropic_error(res, ApiError(400, e.what()));
    } catch (const std::exception& e) {
      send_anthropic_error(res, ApiError(500, std::string("internal error: ") + e.what(), std::nullopt, "server_error"));
    }
  };
}

GenerationParams params_of(const httplib::Request& req, bool need_max_tokens) {
  const json body = parse_json_body(req.body);
  GenerationParams params = parse_generation_request(chat_request(body, need_max_tokens).dump(), Endpoint::chat);
  params.max_tokens_is_cap = true;
  if (params.n != 1) throw bad("n", "the Messages API answers one message per request");
  return params;
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, ModelRegistry& models) {
  http.Post("/v1/messages", anthropic_guarded([&models](const httplib::Request& req, httplib::Response& res) {
              ActiveGuard active(models.server());
              GenerationParams params = params_of(req, true);
              ModelLease model = models.acquire(params.model);
              auto job = std::make_shared<GenerationJob>(std::move(model), std::move(params));
              job->submit();
              if (job->params().stream) {
                stream_job(std::move(job), res, std::make_unique<AnthropicFormat>());
                return;
              }
              wait_for_whole_answer(*job);
              send_json(res, 200, message_of(*job));
            }));
  http.Post("/v1/messages/count_tokens", anthropic_guarded([&models](const httplib::Request& req, httplib::Response& res) {
              GenerationParams params = params_of(req, false);
              ModelLease model = models.acquire(params.model);
              GenerationJob job(std::move(model), std::move(params));
              send_json(res, 200, {{"input_tokens", job.render().front().tokens.size()}});
            }));
}

}  // namespace loom::server
