#include "server/reasoning.h"

#include <algorithm>

namespace loom::server {

namespace {

std::string trim_newlines(std::string s) {
  const size_t a = s.find_first_not_of('\n');
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of('\n');
  return s.substr(a, b - a + 1);
}

}  // namespace

ReasoningTags reasoning_tags(const std::string& source) {
  return source.find(kGemma4Tags.close) != std::string::npos ? kGemma4Tags : kThinkTags;
}

bool template_reasons(const std::string& source) {
  const ReasoningTags tags = reasoning_tags(source);
  return source.find(tags.open) != std::string::npos || source.find(tags.close) != std::string::npos;
}

bool prompt_opens_reasoning(const std::string& prompt, const ReasoningTags& tags) {
  const std::string_view kOpen = tags.open;
  const size_t end = prompt.find_last_not_of(" \n");
  if (end == std::string::npos || end + 1 < kOpen.size()) return false;
  return prompt.compare(end + 1 - kOpen.size(), kOpen.size(), kOpen) == 0;
}

SplitReply split_reasoning(const std::string& text, bool starts_inside, const ReasoningTags& tags) {
  const std::string_view kOpen = tags.open, kClose = tags.close;
  std::string body = text;
  const size_t lead = body.find_first_not_of(" \n");
  const bool opens = lead != std::string::npos && body.compare(lead, kOpen.size(), kOpen) == 0;
  if (opens) body = body.substr(lead + kOpen.size());
  const size_t close = body.find(kClose);
  if (close != std::string::npos && (starts_inside || opens)) {
    return {trim_newlines(body.substr(0, close)), trim_newlines(body.substr(close + kClose.size())), true};
  }
  if (starts_inside || opens) return {trim_newlines(body), "", false};  // still thinking (or cut off)
  return {"", text, true};
}

}  // namespace loom::server
