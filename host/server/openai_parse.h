// Parsing and validating OpenAI request bodies (/v1/completions, /v1/chat/completions; llama.cpp's /infill) into
// GenerationParams. Unknown fields are ignored, as OpenAI does; a known field of the wrong type or out
// of range is an ApiError 400 naming it. No engine access here: token-level checks come later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/fill_in_middle.h"
#include "server/structured_output_parse.h"
#include "server/tuned_sampling.h"
#include "server/tool_calls.h"

namespace loom::server {

enum class Endpoint { completions, chat };

// One completions prompt: text, or token ids when the client sent integers.
struct PromptInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

// An image part of a chat message: where it was (for errors) and its URL (data:, or file:// within the
// allowed folder). The message's text holds private_image_marker() where it goes.
struct ImageInput {
  std::string where;  // "messages[1].content[0]"
  std::string url;
};

struct GenerationParams {
  Endpoint endpoint = Endpoint::completions;
  std::string model;
  std::vector<PromptInput> prompts;           // completions: one or more
  std::vector<chat::ChatMessage> messages;    // chat
  std::vector<ImageInput> images;             // chat: image parts, in order
  std::optional<int64_t> max_tokens;          // none = the endpoint's default
  // Anthropic's max_tokens is a ceiling agents set high whatever the prompt (llama-server's reading):
  // past the context it is cut to what is left instead of refused.
  bool max_tokens_is_cap = false;
  std::optional<double> temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
  std::optional<int64_t> top_k, seed;
  std::vector<std::string> stop;
  TunedSampling tuned;   // logit_bias, top_n_sigma, XTC, DRY, Mirostat
  int64_t n_indent = 0;  // llama.cpp's: a later line indented less than this ends the completion
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report the chosen tokens' logprobs
  int64_t top_logprobs = 0;    // alternatives per token
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N"
  bool echo = false;           // completions: prepend the prompt to the text
  bool ignore_eos = false;     // vLLM extension: keep generating past end-of-generation tokens
  // Fill-in-the-middle: completions' `suffix` (each prompt is a prefix) or llama.cpp's /infill.
  std::optional<std::string> suffix;
  std::string infill_prompt;        // /infill "prompt": text the middle starts with
  std::vector<FimFile> infill_files;  // /infill "input_extra"
  std::optional<StructuredOutput> structured;  // response_format / structured_outputs / guided_*
  std::optional<ToolRequest> tools;            // chat: tools, tool_choice, parallel_tool_calls
  nlohmann::ordered_json chat_context;         // chat: the template's messages (and tools), as sent
};

// The request fields beyond OpenAI's own that llama.cpp's and vLLM's users send (sampling stages,
// guided decoding, template switches): the Anthropic and Responses translations pass them to the
// chat request they build, unchanged.
const std::vector<std::string>& extension_fields();

// The body as a JSON object; ApiError 400 for malformed JSON or a non-object.
nlohmann::json parse_json_body(const std::string& body);

// A completion or chat request's body as generation and /render read it: the parameters, structured
// output, tools and the chat template's context (chat_template_kwargs included).
GenerationParams parse_generation_request(const std::string& raw_body, Endpoint endpoint);

GenerationParams parse_completion_request(const nlohmann::json& body);
GenerationParams parse_chat_request(const nlohmann::json& body);
// llama.cpp's POST /infill: input_prefix, input_suffix, input_extra [{filename, text}], prompt, and the
// completion parameters (n_predict as max_tokens).
GenerationParams parse_infill_request(const nlohmann::json& body);

// /tokenize {"content": "...", "add_special": bool, "with_pieces": bool} and /detokenize {"tokens": [...]}.
struct TokenizeParams {
  std::string content;
  bool add_special = true;
  bool with_pieces = false;
};
TokenizeParams parse_tokenize_request(const nlohmann::json& body);
std::vector<int64_t> parse_detokenize_request(const nlohmann::json& body);

}  // namespace loom::server
