#include "server/responses_api.h"

#include <algorithm>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>

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
using Clock = std::chrono::steady_clock;

// Stored responses for previous_response_id: the conversation so far as chat messages, bounded in
// number and age (in memory only; a restart forgets them).
class ResponseStore {
 public:
  static constexpr size_t kMaxEntries = 1024;
  static constexpr auto kMaxAge = std::chrono::hours(1);

  void put(const std::string& id, ordered_json messages) {
    std::lock_guard lock(mutex_);
    expire();
    entries_[id] = {std::move(messages), Clock::now()};
    order_.push_back(id);
    while (order_.size() > kMaxEntries) {
      entries_.erase(order_.front());
      order_.pop_front();
    }
  }
  std::optional<ordered_json> get(const std::string& id) {
    std::lock_guard lock(mutex_);
    expire();
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.messages;
  }

 private:
  struct Entry {
    ordered_json messages;
    Clock::time_point stored;
  };
  void expire() {
    while (!order_.empty()) {
      auto it = entries_.find(order_.front());
      if (it != entries_.end() && Clock::now() - it->second.stored < kMaxAge) break;
      if (it != entries_.end()) entries_.erase(it);
      order_.pop_front();
    }
  }
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> order_;
};

ResponseStore& store() {
  static ResponseStore instance;
  return instance;
}

ApiError bad(const std::string& field, const std::string& message) { return ApiError(400, "'" + field + "': " + message, field); }

std::string text_of_parts(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad(where, "must be a string or an array of content parts");
  std::string text;
  for (const json& part : content) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if ((type == "input_text" || type == "output_text" || type == "text") && part.contains("text")) text += part["text"].get<std::string>();
    else throw bad(where, "holds a part of type '" + type + "'; this server reads input_text and output_text");
  }
  return text;
}

// `input` (a string or items) appended to the chat messages.
void add_input(const json& input, ordered_json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) throw bad("input", "must be a string or an array of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw bad(where, "must be an object");
    const std::string type = item.value("type", item.contains("role") ? "message" : "");
    if (type == "message") {
      std::string role = item.value("role", "");
      if (role == "developer") role = "system";
      if (role != "user" && role != "system" && role != "assistant") throw bad(where + ".role", "must be user, system, developer or assistant");
      messages.push_back({{"role", role}, {"content", text_of_parts(item.value("content", json("")), where + ".content")}});
    } else if (type == "function_call") {
      ordered_json call = {{"id", item.value("call_id", "")}, {"type", "function"},
                           {"function", {{"name", item.value("name", "")}, {"arguments", item.value("arguments", "{}")}}}};
      if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls")) {
        messages.back()["tool_calls"].push_back(call);
      } else {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", ordered_json::array({call})}});
      }
    } else if (type == "function_call_output") {
      const json output = item.value("output", json(""));
      messages.push_back({{"role", "tool"}, {"tool_call_id", item.value("call_id", "")}, {"content", output.is_string() ? output.get<std::string>() : output.dump()}});
    } else if (type == "reasoning") {
      // Earlier reasoning: dropped from the history, as templates drop it.
    } else {
      throw bad(where + ".type", "'" + type + "' is not an input item this server reads (message, function_call, function_call_output)");
    }
  }
}

struct Translated {
  ordered_json chat;
  ordered_json messages;  // the conversation the answer follows (for the store)
};

Translated chat_request(const json& body) {
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  if (!body.contains("input")) throw bad("input", "is required");
  Translated t;
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null()) {
    const std::string previous = body["previous_response_id"].get<std::string>();
    const std::optional<ordered_json> earlier = store().get(previous);
    if (!earlier) throw ApiError(404, "no stored response '" + previous + "' (responses are kept in memory for an hour)", "previous_response_id");
    t.messages = *earlier;
  } else {
    t.messages = ordered_json::array();
  }
  add_input(body["input"], t.messages);
  ordered_json messages = t.messages;
  if (body.contains("instructions") && body["instructions"].is_string())
    messages.insert(messages.begin(), ordered_json{{"role", "system"}, {"content", body["instructions"]}});
  ordered_json& chat = t.chat;
  chat["messages"] = messages;
  if (body.contains("model")) chat["model"] = body["model"];
  if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null()) chat["max_tokens"] = body["max_output_tokens"];
  for (const char* key : {"temperature", "top_p", "stream", "parallel_tool_calls"}) {
    if (body.contains(key)) chat[key] = body[key];
  }
  for (const std::string& key : extension_fields()) {
    if (body.contains(key)) chat[key] = body[key];
  }
  if (body.contains("tools")) {
    ordered_json tools = ordered_json::array();
    for (const json& tool : body["tools"]) {
      if (tool.value("type", "") != "function") throw bad("tools", "this server runs function tools only");
      ordered_json function = {{"name", tool.value("name", "")}, {"parameters", tool.value("parameters", json{{"type", "object"}})}};
      if (tool.contains("description")) function["description"] = tool["description"];
      if (tool.contains("strict")) function["strict"] = tool["strict"];
      tools.push_back({{"type", "function"}, {"function", function}});
    }
    chat["tools"] = tools;
  }
  if (body.contains("tool_choice")) {
    const json& choice = body["tool_choice"];
    if (choice.is_object() && choice.value("type", "") == "function") chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice.value("name", "")}}}};
    else chat["tool_choice"] = choice;
  }
  if (body.contains("text") && body["text"].is_object() && body["text"].contains("format")) {
    const json& format = body["text"]["format"];
    const std::string type = format.value("type", "text");
    if (type == "json_schema") {
      chat["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", format.value("name", "schema")}, {"schema", format.value("schema", json::object())},
                                                  {"strict", format.value("strict", false)}}}};
    } else if (type == "json_object") {
      chat["response_format"] = {{"type", "json_object"}};
    }
  }
  if (body.contains("reasoning") && body["reasoning"].is_object() && body["reasoning"].contains("effort")) {
    const json effort = body["reasoning"]["effort"];
    chat["chat_template_kwargs"] = {{"enable_thinking", !(effort.is_string() && (effort == "none" || effort == "minimal"))},
                                    {"reasoning_effort", effort}};
  }
  return t;
}

std::string item_id(const std::string& prefix, const std::string& job_id, size_t index) {
  return prefix + job_id.substr(job_id.find('-') + 1) + "_" + std::to_string(index);
}

json usage_of(GenerationJob& job) {
  const Usage u = job.usage();
  return {{"input_tokens", u.prompt_tokens}, {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens}, {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// The chat reply as Responses output items, and the assistant turn for the store.
json output_items(GenerationJob& job, const json& message, ordered_json* stored_turn) {
  json output = json::array();
  if (message.contains("reasoning_content") && message["reasoning_content"].is_string())
    output.push_back({{"type", "reasoning"}, {"id", item_id("rs_", job.id(), output.size())}, {"summary", json::array()},
                      {"content", {{{"type", "reasoning_text"}, {"text", message["reasoning_content"]}}}}});
  if (message["content"].is_string() && !message["content"].get<std::string>().empty())
    output.push_back({{"type", "message"}, {"id", item_id("msg_", job.id(), output.size())}, {"status", "completed"}, {"role", "assistant"},
                      {"content", {{{"type", "output_text"}, {"text", message["content"]}, {"annotations", json::array()}}}}});
  if (message.contains("tool_calls")) {
    for (const json& call : message["tool_calls"])
      output.push_back({{"type", "function_call"}, {"id", item_id("fc_", job.id(), output.size())}, {"call_id", call["id"]},
                        {"name", call["function"]["name"]}, {"arguments", call["function"]["arguments"]}, {"status", "completed"}});
  }
  if (stored_turn != nullptr) {
    *stored_turn = {{"role", "assistant"}, {"content", message["content"]}};
    if (message.contains("tool_calls")) (*stored_turn)["tool_calls"] = message["tool_calls"];
  }
  return output;
}

json response_object(GenerationJob& job, const json& request, const std::string& id, const json& output, const std::string& status,
                     const json& finish) {
  json response = {{"id", id},
                   {"object", "response"},
                   {"created_at", job.created()},
                   {"status", status},
                   {"error", nullptr},
                   {"incomplete_details", finish == "length" ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
                   {"instructions", request.value("instructions", json(nullptr))},
                   {"metadata", request.value("metadata", json::object())},
                   {"model", job.state().model_name},
                   {"output", output},
                   {"parallel_tool_calls", request.value("parallel_tool_calls", true)},
                   {"temperature", request.value("temperature", json(nullptr))},
                   {"top_p", request.value("top_p", json(nullptr))},
                   {"tool_choice", request.value("tool_choice", json("auto"))},
                   {"tools", request.value("tools", json::array())},
                   {"max_output_tokens", request.value("max_output_tokens", json(nullptr))},
                   {"previous_response_id", request.value("previous_response_id", json(nullptr))},
                   {"store", request.value("store", true)},
                   {"text", request.value("text", json{{"format", {{"type", "text"}}}})}};
  if (status != "in_progress") response["usage"] = usage_of(job);
  return response;
}

std::string sse_event(const std::string& type, json data, uint64_t& sequence) {
  data["type"] = type;
  data["sequence_number"] = sequence++;
  return "event: " + type + "\n" + sse_data(dump_json(data));
}

// The reply streamed as Responses events: reasoning and text deltas as they come (one reasoning item,
// one message item), and each function call as an item whose arguments stream as the model writes
// them. Every item closes at the end, in the order the items were added.
class ResponsesFormat : public StreamFormat {
 public:
  ResponsesFormat(json request, std::string id, ordered_json conversation)
      : request_(std::move(request)), id_(std::move(id)), conversation_(std::move(conversation)) {}

  std::string start(GenerationJob& job) override {
    const json response = response_object(job, request_, id_, json::array(), "in_progress", nullptr);
    return sse_event("response.created", {{"response", response}}, seq_) + sse_event("response.in_progress", {{"response", response}}, seq_);
  }

  std::string event(GenerationJob& job, const ChoiceEvent& ce) override {
    std::string out;
    for (const json& chunk : stream_chunks(job, ce)) {
      for (const json& choice : chunk["choices"]) {
        const json& delta = choice["delta"];
        if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string() &&
            !delta["reasoning_content"].get<std::string>().empty()) {
          if (reasoning_index_ < 0) {
            reasoning_index_ = next_index_++;
            reasoning_id_ = item_id("rs_", job.id(), size_t(reasoning_index_));
            out += sse_event("response.output_item.added", {{"output_index", reasoning_index_},
                                                            {"item", {{"type", "reasoning"}, {"id", reasoning_id_}, {"summary", json::array()},
                                                                      {"content", json::array()}}}}, seq_);
          }
          reasoning_ += delta["reasoning_content"].get<std::string>();
          out += sse_event("response.reasoning_text.delta", {{"item_id", reasoning_id_}, {"output_index", reasoning_index_}, {"content_index", 0},
                                                             {"delta", delta["reasoning_content"]}}, seq_);
        }
        if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
          if (message_index_ < 0) {
            message_index_ = next_index_++;
            message_id_ = item_id("msg_", job.id(), size_t(message_index_));
            out += sse_event("response.output_item.added", {{"output_index", message_index_},
                                                            {"item", {{"type", "message"}, {"id", message_id_}, {"status", "in_progress"},
                                                                      {"role", "assistant"}, {"content", json::array()}}}}, seq_);
            out += sse_event("response.content_part.added", {{"item_id", message_id_}, {"output_index", message_index_}, {"content_index", 0},
                                                             {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}}, seq_);
          }
          text_ += delta["content"].get<std::string>();
          out += sse_event("response.output_text.delta", {{"item_id", message_id_}, {"output_index", message_index_}, {"content_index", 0},
                                                          {"delta", delta["content"]}, {"logprobs", json::array()}}, seq_);
        }
        if (delta.contains("tool_calls")) {
          for (const json& call : delta["tool_calls"]) out += call_delta(job, call);
        }
        if (!choice["finish_reason"].is_null()) finish_ = choice["finish_reason"];
      }
    }
    return out;
  }

  std::string finish(GenerationJob& job) override {
    std::string out;
    json output = json::array();
    if (reasoning_index_ >= 0) {  // the reasoning ends where the answer starts, but its item closes here, first
      out += sse_event("response.reasoning_text.done", {{"item_id", reasoning_id_}, {"output_index", reasoning_index_}, {"content_index", 0},
                                                        {"text", reasoning_}}, seq_);
      const json item = {{"type", "reasoning"}, {"id", reasoning_id_}, {"summary", json::array()},
                         {"content", {{{"type", "reasoning_text"}, {"text", reasoning_}}}}};
      out += sse_event("response.output_item.done", {{"output_index", reasoning_index_}, {"item", item}}, seq_);
      output.push_back(item);
    }
    if (message_index_ >= 0) {
      const json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
      out += sse_event("response.output_text.done", {{"item_id", message_id_}, {"output_index", message_index_}, {"content_index", 0},
                                                     {"text", text_}, {"logprobs", json::array()}}, seq_);
      out += sse_event("response.content_part.done", {{"item_id", message_id_}, {"output_index", message_index_}, {"content_index", 0}, {"part", part}}, seq_);
      const json item = {{"type", "message"}, {"id", message_id_}, {"status", "completed"}, {"role", "assistant"}, {"content", {part}}};
      out += sse_event("response.output_item.done", {{"output_index", message_index_}, {"item", item}}, seq_);
      output.push_back(item);
    }
    ordered_json tool_calls = ordered_json::array();
    for (const Call& call : calls_) {
      const json item = call_item(call, "completed");
      out += sse_event("response.function_call_arguments.done", {{"item_id", call.item_id}, {"output_index", call.index}, {"arguments", call.arguments},
                                                                 {"name", call.name}}, seq_);
      out += sse_event("response.output_item.done", {{"output_index", call.index}, {"item", item}}, seq_);
      output.push_back(item);
      tool_calls.push_back({{"id", call.call_id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    // The items in the order they were added (a call may come before the answer's text).
    std::sort(output.begin(), output.end(), [&](const json& a, const json& b) { return index_of(a) < index_of(b); });
    ordered_json turn = {{"role", "assistant"}, {"content", text_.empty() ? ordered_json(nullptr) : ordered_json(text_)}};
    if (!tool_calls.empty()) turn["tool_calls"] = tool_calls;
    if (request_.value("store", true)) {
      ordered_json conversation = conversation_;
      conversation.push_back(turn);
      store().put(id_, conversation);
    }
    const json response = response_object(job, request_, id_, output, finish_ == "length" ? "incomplete" : "completed", finish_);
    // The SDK's stream helper ends on response.completed whatever the status (incomplete when
    // max_output_tokens ran out, with incomplete_details saying so).
    return out + sse_event("response.completed", {{"response", response}}, seq_);
  }

  std::string failure(GenerationJob&, const ApiError& error) override {
    return sse_event("error", {{"code", error.status() == 503 ? "server_is_overloaded" : "server_error"}, {"message", error.what()}, {"param", nullptr}}, seq_);
  }

 private:
  json request_;
  std::string id_;
  ordered_json conversation_;
  uint64_t seq_ = 0;
  int next_index_ = 0, message_index_ = -1, reasoning_index_ = -1;
  std::string message_id_, text_, reasoning_id_, reasoning_;
  struct Call {
    int index;
    std::string item_id, call_id, name, arguments;
  };

  json call_item(const Call& call, const char* status) const {
    return {{"type", "function_call"}, {"id", call.item_id}, {"call_id", call.call_id}, {"name", call.name},
            {"arguments", call.arguments}, {"status", status}};
  }

  // A call's start (the chat delta with its id and name) adds its item; its argument pieces follow as deltas.
  std::string call_delta(GenerationJob& job, const json& delta) {
    std::string out;
    if (delta.contains("id")) {
      const int index = next_index_++;
      calls_.push_back({index, item_id("fc_", job.id(), size_t(index)), delta["id"], delta["function"]["name"], ""});
      out += sse_event("response.output_item.added", {{"output_index", index}, {"item", call_item(calls_.back(), "in_progress")}}, seq_);
    }
    const std::string piece = delta.contains("function") ? delta["function"].value("arguments", "") : "";
    if (piece.empty() || calls_.empty()) return out;
    Call& call = calls_.back();
    call.arguments += piece;
    return out + sse_event("response.function_call_arguments.delta", {{"item_id", call.item_id}, {"output_index", call.index}, {"delta", piece}}, seq_);
  }

  int index_of(const json& item) const {
    const std::string id = item["id"];
    if (id == reasoning_id_) return reasoning_index_;
    if (id == message_id_) return message_index_;
    for (const Call& call : calls_)
      if (call.item_id == id) return call.index;
    return next_index_;
  }

  std::vector<Call> calls_;
  json finish_ = "stop";
};

}  // namespace

void add_responses_routes(httplib::Server& http, ModelRegistry& models) {
  http.Post("/v1/responses", guarded([&models](const httplib::Request& req, httplib::Response& res) {
              ActiveGuard active(models.server());
              const json body = parse_json_body(req.body);
              Translated t = chat_request(body);
              GenerationParams params = parse_generation_request(t.chat.dump(), Endpoint::chat);
              if (params.n != 1) throw invalid_param("n", "a response is one answer");
              ModelLease model = models.acquire(params.model);
              auto job = std::make_shared<GenerationJob>(std::move(model), std::move(params));
              job->submit();
              const std::string id = "resp_" + job->id().substr(job->id().find('-') + 1);
              if (job->params().stream) {
                stream_job(std::move(job), res, std::make_unique<ResponsesFormat>(body, id, t.messages));
                return;
              }
              wait_for_whole_answer(*job);
              const json chat = chat_response(*job);
              ordered_json turn;
              const json output = output_items(*job, chat["choices"][0]["message"], &turn);
              if (body.value("store", true)) {
                t.messages.push_back(turn);
                store().put(id, t.messages);
              }
              const json finish = chat["choices"][0]["finish_reason"];
              send_json(res, 200, response_object(*job, body, id, output, finish == "length" ? "incomplete" : "completed", finish));
            }));
}

}  // namespace loom::server
