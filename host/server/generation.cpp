#include "server/generation.h"
#include "server/harmony.h"
#include "server/reasoning.h"

#include <algorithm>
#include <random>

#include "common/error.h"
#include "server/api_error.h"
#include "server/image_inputs.h"
#include "tokenizer/tokenizer.h"

namespace loom::server {

namespace {

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += digits[rng() % 16];
  return id;
}

// Which request field an engine refusal is about, when its message names one.
std::optional<std::string> param_in(const std::string& message) {
  for (const char* name : {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                           "repetition_penalty", "max_tokens"}) {
    if (message.find(name) != std::string::npos) return std::string(name);
  }
  return std::nullopt;
}

}  // namespace

GenerationJob::GenerationJob(ModelLease model, GenerationParams params)
    : model_(std::move(model)),
      state_(*model_),
      params_(std::move(params)),
      id_(random_id(params_.endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-")),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

GenerationJob::~GenerationJob() { cancel_unfinished(CancelReason::client_disconnected); }

void GenerationJob::cancel_unfinished(CancelReason reason) {
  for (const auto& choice : choices_) {
    if (choice.submitted && choice.finish == FinishReason::none) state_.cancel(choice.id, reason);
  }
}

void GenerationJob::prepare_prompts() {
  const Tokenizer& tok = state_.engine.tokenizer();
  const int64_t n_ctx = state_.engine.info().n_ctx;
  const int32_t n_vocab = tok.n_vocab();
  const std::string field = params_.endpoint == Endpoint::chat ? "messages" : "prompt";
  if (params_.endpoint == Endpoint::chat) {
    std::string text;
    try {
      const std::string bos = tok.bos_id() >= 0 ? tok.token_text(tok.bos_id()) : "";
      const std::string eos = tok.eos_id() >= 0 ? tok.token_text(tok.eos_id()) : "";
      nlohmann::ordered_json context = params_.chat_context;
      if (!template_handles_tools(state_.chat_template.source())) context = tool_turns_as_text(context);
      context["add_generation_prompt"] = true;
      context["bos_token"] = bos;
      context["eos_token"] = eos;
      text = state_.chat_template.render(context);
      harmony_ = template_is_harmony(state_.chat_template.source());
      reasoning_ = harmony_ || template_reasons(state_.chat_template.source());
      reasoning_tags_ = server::reasoning_tags(state_.chat_template.source());
      reasoning_starts_inside_ = reasoning_ && prompt_opens_reasoning(text, reasoning_tags_);
    } catch (const Error& e) {
      throw invalid_param("messages", std::string("the chat template refused the messages: ") + e.what());
    }
    if (params_.images.empty()) {
      // The template writes BOS itself when the model wants it; add one only if it did not.
      std::vector<int32_t> tokens = tok.encode(text, false, true);
      if (tok.add_bos() && tok.bos_id() >= 0 && (tokens.empty() || tokens.front() != tok.bos_id())) {
        tokens.insert(tokens.begin(), tok.bos_id());
      }
      prompts_.push_back({std::move(tokens), {}, ""});
    } else {
      // Images first (a 400 naming the part when one cannot be used), then the text split at their markers.
      const std::vector<EncodedImage> images = resolve_images(state_.engine, state_.settings, params_.images);
      ImagePrompt prompt;
      try {
        prompt = build_image_prompt(tok, text, images, state_.engine.image_format(), private_image_marker());
      } catch (const Error& e) {
        throw invalid_param("messages", e.what());
      }
      prompts_.push_back({std::move(prompt.tokens), std::move(prompt.images), ""});
    }
  } else if (params_.suffix) {
    // Fill-in-the-middle: each prompt is the code before the cursor, the suffix the code after it.
    const FimTokens fim = find_fim_tokens(state_.engine.gguf(), tok);
    if (!fim.usable()) {
      throw invalid_param("suffix", "this model has no fill-in-the-middle tokens (" + fim.missing() +
                                        " missing); use a code model that has them, such as Qwen2.5-Coder, CodeLlama, "
                                        "StarCoder2, DeepSeek-Coder or Codestral");
    }
    // The other files fill what the prompt and the answer leave of the context.
    const int64_t answer = params_.max_tokens.value_or(std::min<int64_t>(n_ctx / 4, 1024));
    for (const PromptInput& input : params_.prompts) {
      const FimInput fim_input{input.text, *params_.suffix, params_.infill_prompt, params_.infill_files};
      prompts_.push_back({fim_prompt(tok, fim, fim_input, n_ctx - answer), {}, ""});
    }
  } else {
    for (const PromptInput& input : params_.prompts) {
      PreparedPrompt p;
      if (input.is_tokens) {
        for (int32_t t : input.tokens) {
          if (t >= n_vocab) {
            throw invalid_param("prompt", "token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                                              std::to_string(n_vocab - 1) + ")");
          }
        }
        p.tokens = input.tokens;
        if (params_.echo) p.text = tok.decode(input.tokens);
      } else {
        p.tokens = tok.encode(input.text, true, true);
        if (params_.echo) p.text = input.text;
      }
      prompts_.push_back(std::move(p));
    }
  }
  // tool_choice "required" or a named function: a grammar makes the reply a list of calls.
  if (params_.tools && (params_.tools->choice == ToolChoice::required || params_.tools->choice == ToolChoice::named)) {
    if (params_.structured) {
      throw invalid_param("tool_choice", "'tool_choice' that forces a call cannot be combined with " + params_.structured->field);
    }
    params_.structured = StructuredOutput{forced_tool_call_grammar(*params_.tools), "tool_choice"};
  }
  if (params_.structured) {
    try {
      constraint_ = state_.engine.compile_constraint(params_.structured->spec);
    } catch (const Error& e) {
      throw invalid_param(params_.structured->field, "'" + params_.structured->field + "' does not compile: " + e.what());
    }
  }
  for (const auto& p : prompts_) {
    if (p.tokens.empty()) throw invalid_param(field, "the prompt is empty");
    const auto n_prompt = static_cast<int64_t>(p.tokens.size());
    if (n_prompt >= n_ctx) {
      throw invalid_param(field, "this model's maximum context length is " + std::to_string(n_ctx) +
                                     " tokens, but the prompt has " + std::to_string(n_prompt) +
                                     " tokens (at least one more is needed to generate)");
    }
    // As OpenAI and vLLM do: a request that cannot be honoured in full is refused, not cut short.
    if (params_.max_tokens && !params_.max_tokens_is_cap && n_prompt + *params_.max_tokens > n_ctx) {
      throw invalid_param("max_tokens", "this model's maximum context length is " + std::to_string(n_ctx) +
                                            " tokens, but the prompt has " + std::to_string(n_prompt) +
                                            " tokens and max_tokens asks for " + std::to_string(*params_.max_tokens) +
                                            " more (" + std::to_string(n_prompt + *params_.max_tokens) +
                                            " in all); ask for at most " + std::to_string(n_ctx - n_prompt) +
                                            ", or leave max_tokens out to generate up to the context");
    }
  }
}

Request GenerationJob::make_request(size_t choice) {
  const PreparedPrompt& prompt = prompts_[choices_[choice].prompt_index];
  const int64_t room = state_.engine.info().n_ctx - static_cast<int64_t>(prompt.tokens.size());
  Request r;
  r.prompt = prompt.tokens;
  // A request naming a run-time adapter ([[lora]]) as its model runs through it (vLLM's convention).
  if (!params_.model.empty() && state_.engine.find_lora(params_.model)) r.lora = params_.model;
  r.images = prompt.images;
  // No max_tokens: up to the context (vLLM's rule, on both endpoints); prepare_prompts() refused any
  // that does not fit.
  r.max_tokens = static_cast<uint32_t>(std::clamp<int64_t>(params_.max_tokens.value_or(room), 1, std::max<int64_t>(room, 1)));
  auto& s = r.sampling.params;
  s = state_.engine.default_sampling();
  if (params_.temperature) s.temperature = static_cast<float>(*params_.temperature);
  if (params_.top_p) s.top_p = static_cast<float>(*params_.top_p);
  if (params_.top_k) s.top_k = static_cast<int32_t>(std::max<int64_t>(*params_.top_k, 0));  // -1 (vLLM) = off
  if (params_.min_p) s.min_p = static_cast<float>(*params_.min_p);
  if (params_.presence_penalty) s.presence_penalty = static_cast<float>(*params_.presence_penalty);
  if (params_.frequency_penalty) s.frequency_penalty = static_cast<float>(*params_.frequency_penalty);
  if (params_.repetition_penalty) s.repetition_penalty = static_cast<float>(*params_.repetition_penalty);
  apply_tuned_sampling(params_.tuned, state_.engine.tokenizer(), r.sampling);
  // Choices of one call differ but stay reproducible: seed + choice index.
  if (params_.seed) {
    r.sampling.seed = static_cast<uint64_t>(*params_.seed) + choice;
  } else if (state_.default_seed >= 0) {
    r.sampling.seed = static_cast<uint64_t>(state_.default_seed) + choice;
  }
  r.stop = params_.stop;
  r.min_indent = static_cast<uint32_t>(params_.n_indent);
  r.ignore_eos = params_.ignore_eos;
  r.constraint = constraint_;
  r.want_logprobs = params_.logprobs;
  r.n_logprobs = static_cast<uint32_t>(params_.logprobs ? params_.top_logprobs : 0);
  auto channel = channel_;
  ServerState* state = &state_;
  r.on_event = [channel, state, choice](const RequestEvent& event) {
    if (event.finish != FinishReason::none) {
      state->untrack(event.id, event.finish);
      --state->n_unfinished;
    }
    channel->push(choice, event);
  };
  return r;
}

const std::vector<PreparedPrompt>& GenerationJob::render() {
  if (prompts_.empty()) prepare_prompts();
  return prompts_;
}

void GenerationJob::submit() {
  if (state_.server.stopping) throw ApiError(503, "the server is shutting down", std::nullopt, "server_error", "shutting_down");
  prepare_prompts();
  for (size_t p = 0; p < prompts_.size(); ++p) {
    for (int64_t i = 0; i < params_.n; ++i) {
      ChoiceProgress c;
      c.prompt_index = p;
      choices_.push_back(c);
    }
  }
  const auto n = static_cast<int64_t>(choices_.size());
  if (n > state_.settings.max_queue) {
    throw invalid_param("n", "this call asks for " + std::to_string(n) + " completions but the server queues at most " +
                                 std::to_string(state_.settings.max_queue));
  }
  if (state_.n_unfinished.fetch_add(n) + n > state_.settings.max_queue) {
    state_.n_unfinished -= n;
    throw ApiError(429, "the server is busy: " + std::to_string(state_.settings.max_queue) +
                            " requests are already queued or running; retry shortly",
                   std::nullopt, "rate_limit_exceeded", "rate_limit_exceeded");
  }
  n_admitted_ = n;
  for (size_t c = 0; c < choices_.size(); ++c) {
    try {
      choices_[c].id = state_.engine.submit(make_request(c));
    } catch (const Error& e) {
      // This choice and the ones after it never reach the engine; the earlier ones are cancelled and
      // return their admission through their final events.
      state_.n_unfinished -= n - static_cast<int64_t>(c);
      cancel_unfinished(CancelReason::choice_failed);
      throw ApiError(400, e.what(), param_in(e.what()));
    }
    choices_[c].submitted = true;
    state_.track(choices_[c].id);
  }
}

std::vector<ChoiceEvent> GenerationJob::poll(std::chrono::milliseconds timeout) {
  std::vector<ChoiceEvent> events = channel_->take(timeout);
  for (const ChoiceEvent& ce : events) {
    ChoiceProgress& c = choices_[ce.choice];
    const RequestEvent& e = ce.event;
    c.text += e.text;
    c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    if (e.finish != FinishReason::none && c.finish == FinishReason::none) {
      c.finish = e.finish;
      c.error = e.error;
      c.n_prompt = e.n_prompt_tokens;
      c.n_completion = e.n_completion_tokens;
      c.n_cached = e.n_cached_tokens;
      ++n_finished_;
    }
  }
  return events;
}

const ChoiceProgress* GenerationJob::failed_choice() const {
  // An error first: the choices cancelled because of it are not the story.
  for (const auto& c : choices_) {
    if (c.finish == FinishReason::error) return &c;
  }
  for (const auto& c : choices_) {
    if (c.finish == FinishReason::cancelled) return &c;
  }
  return nullptr;
}

Usage GenerationJob::usage() const {
  // A prompt counts once however many choices it has; its cached tokens are the best any choice got.
  Usage u;
  std::vector<uint32_t> cached(prompts_.size(), 0);
  for (const auto& c : choices_) {
    u.completion_tokens += c.n_completion;
    cached[c.prompt_index] = std::max(cached[c.prompt_index], c.n_cached);
  }
  for (size_t p = 0; p < prompts_.size(); ++p) {
    u.prompt_tokens += prompts_[p].tokens.size();
    u.cached_tokens += cached[p];
  }
  return u;
}

}  // namespace loom::server
