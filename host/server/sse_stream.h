// Server-sent events for `stream: true`. A StreamFormat turns the job's events into the wire events of
// one API: OpenAI's chunks then `data: [DONE]`, llama.cpp's completion events (/infill), Anthropic's
// Messages events (anthropic_api.h). A client that goes away (a write fails) ends the stream, and the
// job's destructor cancels its requests so their KV blocks are freed.
#pragma once

#include <memory>
#include <string>

namespace httplib {
struct Response;
}

namespace loom::server {

class GenerationJob;
struct ChoiceEvent;
class ApiError;

class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  // Before the first event (Anthropic's message_start).
  virtual std::string start(GenerationJob&) { return ""; }
  virtual std::string event(GenerationJob& job, const ChoiceEvent& event) = 0;
  // After every choice finished well.
  virtual std::string finish(GenerationJob& job) = 0;
  // A choice was cancelled or failed: the stream ends with this error.
  virtual std::string failure(GenerationJob& job, const ApiError& error) = 0;
};

std::string sse_data(const std::string& payload);  // "data: PAYLOAD\n\n"

std::unique_ptr<StreamFormat> openai_stream_format();
// llama.cpp's completion events ({"content", "stop"}), the last with stop true, and no [DONE].
std::unique_ptr<StreamFormat> llama_cpp_stream_format();

// The job must already be submitted.
void stream_job(std::shared_ptr<GenerationJob> job, httplib::Response& res, std::unique_ptr<StreamFormat> format = openai_stream_format());

}  // namespace loom::server
