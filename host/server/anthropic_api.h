// Anthropic's Messages API, which Claude-Code-style agents speak (llama-server serves it too):
// POST /v1/messages (whole, or streamed as message_start, content_block_start/delta/stop, message_delta,
// message_stop) and POST /v1/messages/count_tokens. A request is read into a chat request (system,
// text, image, tool_use and tool_result blocks; tools, tool_choice, stop_sequences, thinking) and runs
// through the same chat template, tool-call parser and reasoning split as /v1/chat/completions; the
// reply's reasoning, text and calls come back as thinking, text and tool_use blocks. Errors come in
// Anthropic's shape ({"type": "error", "error": {"type", "message"}}); the API key may come as
// x-api-key.
#pragma once

#include <httplib.h>

#include "server/api_error.h"
#include "server/model_registry.h"

namespace loom::server {

void add_anthropic_routes(httplib::Server& http, ModelRegistry& models);

// An error in Anthropic's shape ({"type": "error", "error": {"type": "invalid_request_error", ...}}).
void send_anthropic_error(httplib::Response& res, const ApiError& error);

}  // namespace loom::server
