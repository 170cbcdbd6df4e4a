// OpenAI's Responses API (POST /v1/responses), which Codex-style agents speak: `input` as a string or
// items (messages, function_call, function_call_output), `instructions`, function `tools`,
// `tool_choice`, `text.format` (json_schema through the grammar path), `reasoning.effort`,
// `max_output_tokens`, and `previous_response_id` over a bounded, expiring in-memory store. Read into
// the chat request it stands for; the reply comes back as output items (reasoning, message,
// function_call), whole or as Responses stream events.
#pragma once

#include <httplib.h>

#include "server/model_registry.h"

namespace loom::server {

void add_responses_routes(httplib::Server& http, ModelRegistry& models);

}  // namespace loom::server
