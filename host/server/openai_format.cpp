#include "server/openai_format.h"

#include <algorithm>

#include "server/harmony.h"
#include "server/reasoning.h"

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

// Whether this chat call may answer with tool calls (tools given, tool_choice not "none").
bool tools_active(const GenerationJob& job) { return job.params().tools && job.params().tools->choice != ToolChoice::none; }

// A reasoning model's reply split at </think> (or into harmony's channels); other replies are all content.
SplitReply split_reply(const GenerationJob& job, const std::string& text) {
  if (job.harmony()) {
    HarmonyReply h = parse_harmony(text);
    return {std::move(h.reasoning), std::move(h.content), h.closed};
  }
  if (!job.reasoning()) return {"", text, true};
  return split_reasoning(text, job.reasoning_starts_inside(), job.reasoning_tags());
}

// The reply read for tool calls: forced ones are a JSON list; harmony's are commentary messages to
// functions.NAME; otherwise the family's own format in the content.
ParsedReply read_reply(GenerationJob& job, const std::string& text, const SplitReply& split) {
  const ToolChoice choice = job.params().tools->choice;
  if (choice == ToolChoice::required || choice == ToolChoice::named) return parse_forced_tool_calls(split.content);
  if (job.harmony()) {
    ParsedReply reply{split.content, {}};
    for (HarmonyCall& call : parse_harmony(text).calls) reply.calls.push_back({new_call_id(), call.name, call.arguments});
    return reply;
  }
  return parse_tool_calls(split.content, tool_call_format(job.state().chat_template.source()));
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", calls[i].id}, {"type", "function"}, {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

// A finished choice that called tools ends with "tool_calls", as OpenAI reports it.
json finish_for(FinishReason reason, const ParsedReply& reply) {
  if (reason == FinishReason::stop && !reply.calls.empty()) return "tool_calls";
  return finish_value(reason);
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
    const SplitReply split = split_reply(job, cs[i].text);
    json choice = {{"index", i},
                   {"message", {{"role", "assistant"}, {"content", split.content}, {"refusal", nullptr}}},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_value(cs[i].finish)}};
    if (job.reasoning()) choice["message"]["reasoning_content"] = split.reasoning.empty() ? json(nullptr) : json(split.reasoning);
    if (tools_active(job)) {
      const ParsedReply reply = read_reply(job, cs[i].text, split);
      if (!reply.calls.empty()) {
        choice["message"]["content"] = reply.content.empty() ? json(nullptr) : json(reply.content);
        choice["message"]["tool_calls"] = tool_calls_json(reply.calls, false);
        choice["finish_reason"] = finish_for(cs[i].finish, reply);
      }
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
    if (tools_active(job)) {
      // With tools the reply may turn out to be calls. Its content streams up to where a call may
      // begin (tool_call_free_length); the calls go out whole at the end as tool_calls deltas. Forced
      // calls and harmony replies are held to the end.
      const ToolChoice choice = job.params().tools->choice;
      const bool held = choice == ToolChoice::required || choice == ToolChoice::named || job.harmony();
      const ToolCallFormat format = tool_call_format(job.state().chat_template.source());
      json delta = json::object();
      ParsedReply reply;
      if (e.finish == FinishReason::none) {
        if (held) return out;
        // Up to this event's text (c.text already holds the whole poll's), so each token gets its chunk.
        c.streamed = std::min(c.text.size(), c.streamed + e.text.size());
        const std::string so_far = c.text.substr(0, c.streamed);
        const size_t safe = job.reasoning() ? reasoning_safe_length(so_far, job.reasoning_tags()) : so_far.size();
        const SplitReply split = split_reply(job, so_far.substr(0, safe));
        if (split.reasoning.size() > c.sent_reasoning) delta["reasoning_content"] = split.reasoning.substr(c.sent_reasoning);
        c.sent_reasoning = std::max(c.sent_reasoning, split.reasoning.size());
        const size_t free = tool_call_free_length(split.content, format);
        if (free > c.sent_content) delta["content"] = split.content.substr(c.sent_content, free - c.sent_content);
        c.sent_content = std::max(c.sent_content, free);
      } else {
        const SplitReply split = split_reply(job, c.text);
        reply = read_reply(job, c.text, split);
        if (split.reasoning.size() > c.sent_reasoning) delta["reasoning_content"] = split.reasoning.substr(c.sent_reasoning);
        const std::string rest = content_after(split.content, c.sent_content, reply);
        if (!rest.empty() || (c.sent_content == 0 && reply.calls.empty())) delta["content"] = rest;
        if (!reply.calls.empty()) delta["tool_calls"] = tool_calls_json(reply.calls, true);
      }
      if (!delta.empty() || has_logprobs) out.push_back(chat_chunk(job, ce.choice, delta, logprobs(), nullptr));
      if (e.finish != FinishReason::none) out.push_back(chat_chunk(job, ce.choice, json::object(), nullptr, finish_for(e.finish, reply)));
      return out;
    }
    if (job.reasoning()) {
      // What is safe to send (not a partial </think>), split, and the new part of each side.
      const size_t safe = job.harmony() ? harmony_safe_length(c.text) : reasoning_safe_length(c.text, job.reasoning_tags());
      const std::string ready = e.finish == FinishReason::none ? c.text.substr(0, safe) : c.text;
      const SplitReply split = split_reply(job, ready);
      json delta = json::object();
      if (split.reasoning.size() > c.sent_reasoning) delta["reasoning_content"] = split.reasoning.substr(c.sent_reasoning);
      if (split.content.size() > c.sent_content) delta["content"] = split.content.substr(c.sent_content);
      c.sent_reasoning = std::max(c.sent_reasoning, split.reasoning.size());
      c.sent_content = std::max(c.sent_content, split.content.size());
      if (!delta.empty() || has_logprobs) out.push_back(chat_chunk(job, ce.choice, delta, logprobs(), nullptr));
    } else if (!e.text.empty() || has_logprobs) {
      out.push_back(chat_chunk(job, ce.choice, {{"content", e.text}}, logprobs(), nullptr));
    }
    if (e.finish != FinishReason::none) out.push_back(chat_chunk(job, ce.choice, json::object(), nullptr, finish_value(e.finish)));
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
