#include "server/reasoning.h"

#include <algorithm>

namespace loom::server {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

std::string trim_newlines(std::string s) {
  const size_t a = s.find_first_not_of('\n');
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of('\n');
  return s.substr(a, b - a + 1);
}

}  // namespace

bool template_reasons(const std::string& source) {
  return source.find(kOpen) != std::string::npos || source.find(kClose) != std::string::npos;
}

bool prompt_opens_reasoning(const std::string& prompt) {
  const size_t end = prompt.find_last_not_of(" \n");
  if (end == std::string::npos || end + 1 < kOpen.size()) return false;
  return prompt.compare(end + 1 - kOpen.size(), kOpen.size(), kOpen) == 0;
}

SplitReply split_reasoning(const std::string& text, bool starts_inside) {
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

size_t reasoning_safe_length(const std::string& text) {
  if (text.find(kClose) != std::string::npos) return text.size();
  // Hold back a suffix that could be the start of "</think>".
  for (size_t keep = std::min(text.size(), kClose.size() - 1); keep > 0; --keep) {
    if (text.compare(text.size() - keep, keep, kClose.substr(0, keep)) == 0) return text.size() - keep;
  }
  return text.size();
}

}  // namespace loom::server
