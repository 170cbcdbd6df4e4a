// Server-sent events for `stream: true`: `data: {chunk}\n\n` per OpenAI chunk, then `data: [DONE]\n\n`.
// A client that goes away (a write fails) ends the stream, and the job's destructor cancels its
// requests so their KV blocks are freed.
#pragma once

#include <memory>

namespace httplib {
struct Response;
}

namespace loom::server {

class GenerationJob;

// openai: OpenAI's chunks, the usage chunk when asked, then [DONE]; llama_cpp: llama.cpp's completion
// events ({"content", "stop"}, /infill), the last with stop true, and no [DONE].
enum class StreamShape { openai, llama_cpp };

// The job must already be submitted.
void stream_job(std::shared_ptr<GenerationJob> job, httplib::Response& res, StreamShape shape = StreamShape::openai);

}  // namespace loom::server
