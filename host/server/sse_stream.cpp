#include "server/sse_stream.h"
#include "server/infill_api.h"

#include <chrono>
#include <cstdio>

#include <httplib.h>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai_format.h"

namespace loom::server {

namespace {

using namespace std::chrono_literals;

// How long a stream may stay silent (waiting in the queue, or a slow prefill) before it sends an SSE
// comment. The write is what notices a vanished client, so this bounds how long its blocks stay held.
constexpr auto kHeartbeat = 1s;
constexpr auto kPollInterval = 100ms;

// Owned by the content provider: destroyed (and the job's unfinished requests cancelled) when httplib
// is done with the response, whether it ended well or the client vanished.
struct StreamState {
  std::shared_ptr<GenerationJob> job;
  ActiveGuard active;
  Clock::time_point last_write = Clock::now();
  bool failed = false;
  std::string error_message;
  bool cancelled = false;

  std::unique_ptr<StreamFormat> format;
  bool started = false;

  StreamState(std::shared_ptr<GenerationJob> j, std::unique_ptr<StreamFormat> f)
      : job(std::move(j)), active(job->state().server), format(std::move(f)) {}
};

bool write(httplib::DataSink& sink, StreamState& s, const std::string& data) {
  s.last_write = Clock::now();
  return sink.write(data.data(), data.size());
}

// One call of the content provider: send what the engine produced since the last call. False ends
// the response (the client is gone).
bool stream_step(const std::shared_ptr<StreamState>& state, httplib::DataSink& sink) {
  GenerationJob& job = *state->job;
  std::string out;
  if (!state->started) {
    out += state->format->start(job);
    state->started = true;
  }
  for (const ChoiceEvent& ce : job.poll(kPollInterval)) {
    if (ce.event.finish == FinishReason::cancelled || ce.event.finish == FinishReason::error) {
      if (!state->failed) {
        state->failed = true;
        state->cancelled = ce.event.finish == FinishReason::cancelled;
        state->error_message = ce.event.error;
        // The other choices cannot make the response whole any more.
        job.cancel_unfinished(CancelReason::choice_failed);
      }
      continue;
    }
    out += state->format->event(job, ce);
  }
  if (job.all_finished()) {
    if (state->failed) {
      const ApiError error = state->cancelled
                                 ? ApiError(503, "the request was cancelled: the server is shutting down", std::nullopt,
                                            "server_error", "shutting_down")
                                 : ApiError(500, "generation failed: " + state->error_message, std::nullopt, "server_error");
      out += state->format->failure(job, error);
    } else {
      out += state->format->finish(job);
    }
    if (!write(sink, *state, out)) return false;
    sink.done();
    return true;
  }
  if (!out.empty()) return write(sink, *state, out);
  if (!sink.is_writable()) return false;
  if (Clock::now() - state->last_write >= kHeartbeat) return write(sink, *state, ": keep-alive\n\n");
  return true;
}

class OpenAiFormat : public StreamFormat {
 public:
  std::string event(GenerationJob& job, const ChoiceEvent& ce) override {
    std::string out;
    for (const auto& chunk : stream_chunks(job, ce)) out += sse_data(dump_json(chunk));
    return out;
  }
  std::string finish(GenerationJob& job) override {
    std::string out;
    if (job.params().include_usage) out += sse_data(dump_json(usage_chunk(job)));
    return out + sse_data("[DONE]");
  }
  // OpenAI's SDKs raise an APIError for an event with an "error" member.
  std::string failure(GenerationJob&, const ApiError& error) override { return sse_data(dump_json(error.body())) + sse_data("[DONE]"); }
};

class LlamaCppFormat : public StreamFormat {
 public:
  std::string event(GenerationJob& job, const ChoiceEvent& ce) override { return sse_data(dump_json(llama_completion_chunk(job, ce))); }
  std::string finish(GenerationJob&) override { return ""; }
  std::string failure(GenerationJob&, const ApiError& error) override { return sse_data(dump_json(error.body())); }
};

}  // namespace

std::string sse_data(const std::string& payload) { return "data: " + payload + "\n\n"; }

std::unique_ptr<StreamFormat> openai_stream_format() { return std::make_unique<OpenAiFormat>(); }
std::unique_ptr<StreamFormat> llama_cpp_stream_format() { return std::make_unique<LlamaCppFormat>(); }

void stream_job(std::shared_ptr<GenerationJob> submitted, httplib::Response& res, std::unique_ptr<StreamFormat> format) {
  auto state = std::make_shared<StreamState>(std::move(submitted), std::move(format));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [state](size_t /*offset*/, httplib::DataSink& sink) -> bool {
    // httplib calls this outside its handler try/catch: an exception here must not end the process.
    try {
      return stream_step(state, sink);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loom serve: stream %s ended by an internal error: %s\n", state->job->id().c_str(), e.what());
      return false;
    }
  });
}

}  // namespace loom::server
