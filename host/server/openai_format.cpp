#include "server/openai_format.h"

#include <algorithm>
#include <optional>

#include "server/reply_stream.h"

#include "tokenizer/tokenizer.h"

namespace loom::server {

namespace {

// The model a response names: the adapter the request chose (vLLM answers with the adapter's name), else
// the served model.
std::string served_model(const GenerationJob& job) {
  const std::string& requested = job.params().model;
  return !requested.empty() && job.state().engine.find_lora(requested) ? requested : job.state().model_name;
}

using nlohmann::json;

std::string finish_name(FinishReason reason) {
  // Cancelled and failed choices never reach a success body; "stop" and "length" are OpenAI's words.
  return finish_reason_name(reason);
}

std::string piece(const Tokenizer& tok, int32_t id) { return tok.token_to_piece(id, true); }

// How a logprobs entry names its token: its text, or vLLM's "token_id:N" with
// return_tokens_as_token_ids (for tokens whose text is not valid UTF-8 on its own, and for tests).
std::string token_name(const Tokenizer& tok, int32_t id, bool as_ids) {
  return as_ids ? "token_id:" + std::to_string(id) : piece(tok, id);
}

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

// Legacy completions logprobs: parallel arrays.
json completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps, size_t& text_offset, bool as_ids) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& lp : lps) {
    const std::string p = piece(tok, lp.token);
    tokens.push_back(token_name(tok, lp.token, as_ids));
    token_logprobs.push_back(lp.logprob);
    json alternatives = json::object();
    for (const auto& [id, value] : lp.top) alternatives[token_name(tok, id, as_ids)] = value;
    top.push_back(alternatives);
    offsets.push_back(text_offset);
    text_offset += p.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

// Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [...]}], "refusal": null}.
json chat_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps, bool as_ids) {
  json content = json::array();
  for (const auto& lp : lps) {
    const std::string p = piece(tok, lp.token);
    json top = json::array();
    for (const auto& [id, value] : lp.top) {
      const std::string alt = piece(tok, id);
      top.push_back({{"token", token_name(tok, id, as_ids)}, {"logprob", value}, {"bytes", bytes_of(alt)}});
    }
    content.push_back({{"token", token_name(tok, lp.token, as_ids)}, {"logprob", lp.logprob}, {"bytes", bytes_of(p)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json chunk_base(GenerationJob& job, const char* object) {
  json chunk = {{"id", job.id()},
                {"object", object},
                {"created", job.created()},
                {"model", served_model(job)},
                {"system_fingerprint", nullptr},
                {"choices", json::array()}};
  if (job.params().include_usage) chunk["usage"] = nullptr;
  return chunk;
}

// One chat stream chunk for a choice: its delta, logprobs (null when none) and finish reason.
json chat_chunk(GenerationJob& job, size_t choice, json delta, json logprobs, json finish_reason) {
  json chunk = chunk_base(job, "chat.completion.chunk");
  chunk["choices"].push_back(
      {{"index", choice}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}});
  return chunk;
}

json finish_value(FinishReason reason) {
  if (reason == FinishReason::none) return nullptr;
  return finish_name(reason);
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& call : calls)
    out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return out;
}

// A finished choice that called tools ends with "tool_calls", as OpenAI reports it.
json finish_for(FinishReason reason, size_t calls) {
  if (reason == FinishReason::stop && calls > 0) return "tool_calls";
  return finish_value(reason);
}

// A reply event as a chat chunk's delta. A call starts with its index, id and name (arguments ""), and
// its arguments follow in pieces under the same index, as OpenAI streams them.
std::optional<json> delta_of(const ReplyEvent& event, const ReplyStream& reply) {
  switch (event.kind) {
    case ReplyEvent::Kind::text: return json{{"content", event.text}};
    case ReplyEvent::Kind::reasoning: return json{{"reasoning_content", event.text}};
    case ReplyEvent::Kind::call_begin:
      return json{{"tool_calls", {{{"index", event.call}, {"id", reply.call_id(event.call)}, {"type", "function"},
                                   {"function", {{"name", event.name}, {"arguments", ""}}}}}}};
    case ReplyEvent::Kind::call_arguments: return json{{"tool_calls", {{{"index", event.call}, {"function", {{"arguments", event.text}}}}}}};
    case ReplyEvent::Kind::call_end: return std::nullopt;
  }
  return std::nullopt;
}

// Consecutive text (or reasoning, or one call's arguments) from one engine event goes out as one delta.
bool merge_into(json& previous, const json& next) {
  for (const char* key : {"content", "reasoning_content"}) {
    if (previous.size() == 1 && next.size() == 1 && previous.contains(key) && next.contains(key)) {
      previous[key] = previous[key].get<std::string>() + next[key].get<std::string>();
      return true;
    }
  }
  if (!previous.contains("tool_calls") || !next.contains("tool_calls")) return false;
  json& last = previous["tool_calls"][0];
  const json& piece = next["tool_calls"][0];
  if (last["index"] != piece["index"] || piece.contains("id")) return false;
  last["function"]["arguments"] = last["function"]["arguments"].get<std::string>() + piece["function"]["arguments"].get<std::string>();
  return true;
}

}  // namespace

std::string dump_json(const nlohmann::json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json completion_response(GenerationJob& job) {
  const Tokenizer& tok = job.state().engine.tokenizer();
  json choices = json::array();
  auto& cs = job.choices();
  for (size_t i = 0; i < cs.size(); ++i) {
    const std::string& prefix = job.prompts()[cs[i].prompt_index].text;
    size_t offset = prefix.size();
    json choice = {{"index", i}, {"text", prefix + cs[i].text}, {"logprobs", nullptr}, {"finish_reason", finish_value(cs[i].finish)}};
    if (job.params().logprobs) choice["logprobs"] = completion_logprobs(tok, cs[i].logprobs, offset, job.params().tokens_as_ids);
    choices.push_back(choice);
  }
  return {{"id", job.id()},          {"object", "text_completion"}, {"created", job.created()},
          {"model", served_model(job)}, {"system_fingerprint", nullptr}, {"choices", choices},
          {"usage", usage_json(job.usage())}};
}

json chat_response(GenerationJob& job) {
  const Tokenizer& tok = job.state().engine.tokenizer();
  json choices = json::array();
  auto& cs = job.choices();
  for (size_t i = 0; i < cs.size(); ++i) {
    const WholeReply reply = read_whole_reply(job, cs[i].text);
    json choice = {{"index", i},
                   {"message", {{"role", "assistant"}, {"content", reply.content}, {"refusal", nullptr}}},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_for(cs[i].finish, reply.calls.size())}};
    if (job.reasoning()) choice["message"]["reasoning_content"] = reply.reasoning.empty() ? json(nullptr) : json(reply.reasoning);
    if (!reply.calls.empty()) {
      choice["message"]["content"] = reply.content.empty() ? json(nullptr) : json(reply.content);
      choice["message"]["tool_calls"] = tool_calls_json(reply.calls);
    }
    if (job.params().logprobs) choice["logprobs"] = chat_logprobs(tok, cs[i].logprobs, job.params().tokens_as_ids);
    choices.push_back(choice);
  }
  return {{"id", job.id()},          {"object", "chat.completion"}, {"created", job.created()},
          {"model", served_model(job)}, {"system_fingerprint", nullptr}, {"choices", choices},
          {"usage", usage_json(job.usage())}};
}

std::vector<json> stream_chunks(GenerationJob& job, const ChoiceEvent& ce) {
  const Tokenizer& tok = job.state().engine.tokenizer();
  ChoiceProgress& c = job.choices()[ce.choice];
  const RequestEvent& e = ce.event;
  const bool chat = job.params().endpoint == Endpoint::chat;
  const bool has_logprobs = job.params().logprobs && !e.logprobs.empty();
  auto logprobs = [&] { return has_logprobs ? chat_logprobs(tok, e.logprobs, job.params().tokens_as_ids) : json(nullptr); };
  std::vector<json> out;
  if (e.finish == FinishReason::cancelled || e.finish == FinishReason::error) return out;  // the caller reports it
  if (chat) {
    if (!c.started) {
      out.push_back(chat_chunk(job, ce.choice, {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}, nullptr, nullptr));
      c.started = true;
    }
    if (!c.reply) c.reply = std::make_shared<ReplyStream>(job);
    const bool ended = e.finish != FinishReason::none;
    std::vector<json> deltas;
    for (const ReplyEvent& event : c.reply->read(e.text, ended)) {
      std::optional<json> delta = delta_of(event, *c.reply);
      if (delta && (deltas.empty() || !merge_into(deltas.back(), *delta))) deltas.push_back(std::move(*delta));
    }
    if (deltas.empty() && has_logprobs) deltas.push_back({{"content", ""}});  // a token whose text is held still has logprobs
    for (size_t k = 0; k < deltas.size(); ++k) out.push_back(chat_chunk(job, ce.choice, deltas[k], k == 0 ? logprobs() : json(nullptr), nullptr));
    if (ended) out.push_back(chat_chunk(job, ce.choice, json::object(), nullptr, finish_for(e.finish, c.reply->calls())));
  } else if (!e.text.empty() || has_logprobs || e.finish != FinishReason::none) {
    json chunk = chunk_base(job, "text_completion");
    json choice = {{"index", ce.choice}, {"text", e.text}, {"logprobs", nullptr}, {"finish_reason", finish_value(e.finish)}};
    if (job.params().logprobs) choice["logprobs"] = completion_logprobs(tok, e.logprobs, c.text_offset, job.params().tokens_as_ids);
    chunk["choices"].push_back(choice);
    out.push_back(chunk);
  }
  return out;
}

json usage_chunk(GenerationJob& job) {
  json chunk = chunk_base(job, job.params().endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
  chunk["usage"] = usage_json(job.usage());
  return chunk;
}

}  // namespace loom::server
