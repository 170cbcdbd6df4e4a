// The incremental reply parser (reply_events.h) for calls written as a JSON list after a marker:
// Mistral's "[TOOL_CALLS]", and "" for the forced-call grammar's list, which is the whole reply.
#pragma once

#include <memory>
#include <string>

#include "server/reply_events.h"

namespace loom::server {

std::unique_ptr<ReplyParser> call_list_reply_parser(std::string marker);

}  // namespace loom::server
