// Reasoning in tagged blocks (<think>...</think>, Gemma 4's <|channel>thought...<channel|>) in front of
// a reply's own parser (reply_events.h): the block streams as reasoning events, what follows it goes to
// `inner` (text and calls). Newlines at either end of each part are dropped, as split_reasoning does.
#pragma once

#include <memory>

#include "server/reasoning.h"
#include "server/reply_events.h"

namespace loom::server {

// starts_inside: the rendered prompt opened the block, so the reply begins inside it.
std::unique_ptr<ReplyParser> reasoning_reply_parser(ReasoningTags tags, bool starts_inside, std::unique_ptr<ReplyParser> inner);

}  // namespace loom::server
