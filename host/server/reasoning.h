// Reasoning models (Qwen3, QwQ, DeepSeek-R1 and its distills, ...) think in <think>...</think> before
// answering, Gemma 4 in <|channel>thought ...<channel|>; the chat API returns that apart from the
// answer, as `reasoning_content` (vLLM's and DeepSeek's field). A template whose generation prompt
// already opens the block makes the reply start inside the reasoning, with only the closing tag in
// the output.
#pragma once

#include <string>
#include <string_view>

namespace loom::server {

struct ReasoningTags {
  std::string_view open, close;
};
inline constexpr ReasoningTags kThinkTags{"<think>", "</think>"};
inline constexpr ReasoningTags kGemma4Tags{"<|channel>thought", "<channel|>"};

struct SplitReply {
  std::string reasoning;  // without the tags
  std::string content;
  bool closed = false;    // the reasoning ended (</think> seen), or there was none
};

// Whether a model with this chat template reasons in tagged blocks, and which tags it uses.
bool template_reasons(const std::string& template_source);
ReasoningTags reasoning_tags(const std::string& template_source);
// Whether this rendered prompt leaves the reply inside the block (it ends with an open tag).
bool prompt_opens_reasoning(const std::string& prompt, const ReasoningTags& tags = kThinkTags);

SplitReply split_reasoning(const std::string& text, bool starts_inside, const ReasoningTags& tags = kThinkTags);

}  // namespace loom::server
