// The incremental reply parser (reply_events.h) for Llama 3.1+'s calls: the reply is one call object
// {"name": ..., "parameters": {...}}, or several separated by ';', optionally after <|python_tag|>;
// any other reply is text.
#pragma once

#include <memory>

#include "server/reply_events.h"

namespace loom::server {

std::unique_ptr<ReplyParser> llama3_reply_parser();

}  // namespace loom::server
