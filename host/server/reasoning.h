// Reasoning models (Qwen3, QwQ, DeepSeek-R1 and its distills, ...) think in <think>...</think> before
// answering; the chat API returns that apart from the answer, as `reasoning_content` (vLLM's and
// DeepSeek's field). A template whose generation prompt already opens <think> makes the reply start
// inside the reasoning, with only the closing tag in the output.
#pragma once

#include <string>

namespace loom::server {

struct SplitReply {
  std::string reasoning;  // without the tags
  std::string content;
  bool closed = false;    // the reasoning ended (</think> seen), or there was none
};

// Whether a model with this chat template reasons in <think> blocks.
bool template_reasons(const std::string& template_source);
// Whether this rendered prompt leaves the reply inside <think> (it ends with an open tag).
bool prompt_opens_reasoning(const std::string& prompt);

SplitReply split_reasoning(const std::string& text, bool starts_inside);

// How much of a growing reply can be sent without splitting the closing tag: all of it once the
// tag was seen, else all but a possible partial "</think>" at the end.
size_t reasoning_safe_length(const std::string& text);

}  // namespace loom::server
