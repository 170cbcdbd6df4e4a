// The incremental reply parser (reply_events.h) for gpt-oss's harmony (harmony.h): analysis messages
// stream as reasoning, final messages and preambles as text, and a commentary message addressed
// to=functions.NAME as a call whose body streams as its arguments. Bodies are trimmed and messages of a
// kind joined by a blank line, as parse_harmony does.
#pragma once

#include <memory>

#include "server/reply_events.h"

namespace loom::server {

std::unique_ptr<ReplyParser> harmony_reply_parser();

}  // namespace loom::server
