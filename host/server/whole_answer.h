// Waiting for a non-streamed answer: every choice finished, a client that hangs up meanwhile has its
// requests cancelled at once (as a stream's are when a write fails), and a failed choice becomes the
// ApiError it deserves. Shared by the routes that answer whole (OpenAI's, /infill, /v1/messages).
#pragma once

#include "server/generation.h"

namespace loom::server {

// Returns once every choice finished well; ApiError 499 (client gone), 503 (cancelled: shutting
// down) or 500 (generation failed) otherwise.
void wait_for_whole_answer(GenerationJob& job);

}  // namespace loom::server
