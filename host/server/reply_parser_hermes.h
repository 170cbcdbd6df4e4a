// The Hermes format's incremental reply parser (reply_events.h): <tool_call>{...}</tool_call> calls.
#pragma once

#include <memory>

#include "server/reply_events.h"

namespace loom::server {

std::unique_ptr<ReplyParser> hermes_reply_parser();

}  // namespace loom::server
