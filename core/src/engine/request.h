// What a client asks for (Request) and what it gets back (RequestEvent), shared by `generate`, `chat`,
// the server and the benchmarks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/sampler.h"

namespace loom {

using RequestId = uint64_t;
class CompiledConstraint;  // engine/grammar_constraint.h
using Clock = std::chrono::steady_clock;

// grammar_dead_end: the output grammar allowed no next token (a grammar whose every path needs a byte
// the vocabulary cannot write); the text so far is kept. Its name is "grammar_dead_end".
enum class FinishReason { none, stop, length, cancelled, error, grammar_dead_end };
const char* finish_reason_name(FinishReason reason);  // OpenAI's words: "stop", "length", ...

struct SamplingOptions {
  loom_sampling_params params{};  // filled from the sampler plugin's defaults, then overridden
  std::optional<uint64_t> seed;   // none = a fresh random seed per request
  // What params borrows: the engine points params at these when the request is submitted.
  std::vector<int32_t> logit_bias_tokens;
  std::vector<float> logit_bias_values;
  std::vector<int32_t> dry_breaker_tokens;

  // Points params' borrowed arrays at the vectors above (call again after the request moves).
  void bind() {
    params.n_logit_bias = static_cast<uint32_t>(logit_bias_tokens.size());
    params.logit_bias_tokens = logit_bias_tokens.empty() ? nullptr : logit_bias_tokens.data();
    params.logit_bias_values = logit_bias_values.empty() ? nullptr : logit_bias_values.data();
    params.n_dry_breakers = static_cast<uint32_t>(dry_breaker_tokens.size());
    params.dry_breaker_tokens = dry_breaker_tokens.empty() ? nullptr : dry_breaker_tokens.data();
  }
  // Mirostat keeps a running target and XTC draws whether to apply per step: neither can be replayed
  // for drafted positions, so requests using them run without speculative decoding.
  bool speculation_exact() const {
    return params.mirostat == 0 && !(params.xtc_probability > 0.0f && params.xtc_threshold <= 0.5f);
  }
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // alternatives, best first
};

struct RequestEvent {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // new tokens since the last event
  std::string text;             // their text: complete UTF-8 only, stop strings removed
  std::vector<TokenLogprob> logprobs;
  FinishReason finish = FinishReason::none;  // set on the last event
  std::string error;                         // with FinishReason::error
  // usage, valid on the last event
  uint32_t n_prompt_tokens = 0;
  uint32_t n_completion_tokens = 0;
  uint32_t n_cached_tokens = 0;
  double ttft_seconds = 0;
  double queue_seconds = 0;
};

using EventCallback = std::function<void(const RequestEvent&)>;

// An image in a prompt (vision models): prompt positions [first, first + n_rows) are its placeholder
// tokens, whose inputs are the vision encoder's rows. The placeholders' ids carry the image's content
// hash (vision/image_prompt.h), so the prefix cache tells images apart. The rows are decoded together:
// non-causally where the model does so (Gemma 3), and a prompt chunk never ends inside them.
struct PromptImage {
  uint32_t first = 0;
  uint32_t n_rows = 0;
  std::shared_ptr<const std::vector<float>> rows;  // [n_rows][the model's width]
  bool non_causal = true;
  // M-RoPE models (Qwen2-VL): the rows as a grid, columns x rows, row by row. Each row turns by
  // (time, height, width) = (p, p + its row, p + its column) from the image's first position p, and
  // the image advances the positions after it by max(columns, rows), as mtmd places them. 0: none.
  uint32_t grid_columns = 0, grid_rows = 0;
};

struct Request {
  std::vector<int32_t> prompt;
  std::vector<PromptImage> images;  // ascending, not overlapping
  uint32_t max_tokens = 256;
  SamplingOptions sampling;
  std::vector<std::string> stop;  // stop strings
  // llama.cpp's n_indent (code completion at a cursor): a line after the first with less leading
  // whitespace than this ends generation before it. 0 = off.
  uint32_t min_indent = 0;
  bool ignore_eos = false;
  uint32_t n_logprobs = 0;        // 0 = none; else the chosen token's logprob plus this many alternatives
  bool want_logprobs = false;
  int32_t priority = 0;           // with policy "priority": larger runs first
  bool speculative = true;        // use the configured drafter when there is one (not with a constraint)
  // A run-time LoRA adapter of the engine ([[lora]] name), or empty for the base model alone.
  std::string lora;
  // Structured output: every token keeps the text inside this grammar (Engine::compile_constraint).
  std::shared_ptr<const CompiledConstraint> constraint;
  EventCallback on_event;         // called from the engine thread; must not block for long
};

}  // namespace loom
