// GenerationJob — one /v1/completions or /v1/chat/completions call: its prompts turned into tokens,
// one engine request per choice (n per prompt), and the events that come back. The HTTP handler
// polls it; destroying it cancels whatever has not finished (counted as a client disconnect), so a
// client that goes away frees its KV blocks.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/event_channel.h"
#include "server/openai_parse.h"
#include "server/reasoning.h"
#include "server/model_registry.h"
#include "server/server_state.h"

namespace loom::server {

class ReplyStream;

struct PreparedPrompt {
  std::vector<int32_t> tokens;
  std::vector<PromptImage> images;  // chat with image parts: where the encoder's rows go
  std::string text;  // completions with echo: the text to prepend
};

struct ChoiceProgress {
  size_t prompt_index = 0;
  RequestId id = 0;
  bool submitted = false;
  std::string text;                     // accumulated (non-streaming responses)
  std::vector<TokenLogprob> logprobs;   // accumulated (non-streaming responses)
  size_t text_offset = 0;               // completions logprobs: where the next token's text starts
  bool started = false;                 // streaming: the first chunk (chat: the role) was sent
  std::shared_ptr<ReplyStream> reply;   // streaming chat: the reply read so far (reply_stream.h)
  FinishReason finish = FinishReason::none;
  std::string error;
  uint32_t n_prompt = 0, n_completion = 0, n_cached = 0;
};

struct Usage {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t cached_tokens = 0;
};

class GenerationJob {
 public:
  // The lease keeps the model in memory until the job is destroyed.
  GenerationJob(ModelLease model, GenerationParams params);
  ~GenerationJob();
  GenerationJob(const GenerationJob&) = delete;
  GenerationJob& operator=(const GenerationJob&) = delete;

  // Tokenise and check the prompts, admit (429 when the queue is full, 503 while shutting down) and
  // submit every choice. ApiError on refusal; nothing stays queued then.
  void submit();
  // The prompts' token ids exactly as submit() would run them (chat template applied), without
  // submitting anything: vLLM's /render endpoints, which KV-aware routers call to match prefixes.
  const std::vector<PreparedPrompt>& render();

  // Events since the last call, waiting up to `timeout` for the first; applied to the choices.
  std::vector<ChoiceEvent> poll(std::chrono::milliseconds timeout);
  bool all_finished() const { return n_finished_ == choices_.size(); }
  // The first choice that ended in error or cancellation, or null.
  const ChoiceProgress* failed_choice() const;
  Usage usage() const;
  // Cancel every submitted choice that has not finished; /metrics counts them under `reason`.
  void cancel_unfinished(CancelReason reason);

  const GenerationParams& params() const { return params_; }
  const std::vector<PreparedPrompt>& prompts() const { return prompts_; }
  std::vector<ChoiceProgress>& choices() { return choices_; }
  const std::string& id() const { return id_; }
  int64_t created() const { return created_; }
  ServerState& state() const { return state_; }
  // A reasoning model's chat reply: its <think> part goes out as reasoning_content.
  bool reasoning() const { return reasoning_; }
  bool reasoning_starts_inside() const { return reasoning_starts_inside_; }
  const ReasoningTags& reasoning_tags() const { return reasoning_tags_; }
  // gpt-oss: the reply is harmony messages (server/harmony.h), reasoning and calls in their channels.
  bool harmony() const { return harmony_; }

 private:
  void prepare_prompts();
  Request make_request(size_t choice);

  ModelLease model_;
  ServerState& state_;
  GenerationParams params_;
  std::string id_;
  int64_t created_;
  std::vector<PreparedPrompt> prompts_;
  std::vector<ChoiceProgress> choices_;
  std::shared_ptr<const CompiledConstraint> constraint_;
  bool reasoning_ = false, reasoning_starts_inside_ = false, harmony_ = false;
  ReasoningTags reasoning_tags_ = kThinkTags;  // structured output, compiled once for every choice
  size_t n_finished_ = 0;
  int64_t n_admitted_ = 0;  // counted in state_.n_unfinished, returned by the engine's final events
  std::shared_ptr<EventChannel> channel_ = std::make_shared<EventChannel>();
};

}  // namespace loom::server
