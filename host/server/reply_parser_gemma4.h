// Gemma 4's calls (tool_calls_gemma4.h) read incrementally (reply_events.h): <|tool_call>call:NAME{...}
// <tool_call|>. The arguments are not JSON (bare keys, strings between <|"|> marks), so the parser
// translates them to JSON as they are written: each piece of the call goes out as soon as its JSON
// text is known.
#pragma once

#include <memory>

#include "server/reply_events.h"

namespace loom::server {

std::unique_ptr<ReplyParser> gemma4_reply_parser();

}  // namespace loom::server
