#include "server/harmony.h"

#include <string_view>

namespace loom::server {

namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>";

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \n\t");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \n\t");
  return std::string(s.substr(a, b - a + 1));
}

// The word after `key` in a header, up to a space or a marker.
std::string header_field(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  const size_t begin = at + key.size();
  const size_t end = header.find_first_of(" <\n", begin);
  return std::string(header.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
}

void append(std::string& out, std::string_view piece) {
  if (!out.empty() && !piece.empty()) out += "\n\n";
  out += piece;
}

}  // namespace

bool template_is_harmony(const std::string& source) {
  return source.find(kChannel) != std::string::npos && source.find(kMessage) != std::string::npos &&
         source.find("<|return|>") != std::string::npos;
}

HarmonyReply parse_harmony(const std::string& text) {
  HarmonyReply reply;
  const std::string_view all = text;
  if (all.find(kChannel) == std::string_view::npos && all.find(kMessage) == std::string_view::npos) {
    reply.content = trim(all);  // no harmony structure at all: plain text is the answer
    reply.closed = true;
    return reply;
  }
  size_t pos = 0;
  while (pos < all.size()) {
    size_t next = all.find(kStart, pos);
    const std::string_view message = all.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    pos = next == std::string_view::npos ? all.size() : next + kStart.size();
    const size_t body_at = message.find(kMessage);
    if (body_at == std::string_view::npos) continue;  // a header still being written
    const std::string_view header = message.substr(0, body_at);
    const std::string_view body = message.substr(body_at + kMessage.size());
    const std::string channel = header_field(header, kChannel);
    const std::string recipient = header_field(header, "to=");
    if (recipient.rfind("functions.", 0) == 0) {
      reply.calls.push_back({recipient.substr(10), trim(body)});
      reply.closed = true;
    } else if (channel == "analysis") {
      append(reply.reasoning, trim(body));
    } else {
      append(reply.content, trim(body));
      reply.closed = true;
    }
  }
  return reply;
}

}  // namespace loom::server
