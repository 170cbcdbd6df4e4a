#include "server/whole_answer.h"

#include <chrono>

#include "server/api_error.h"
#include "server/connection_stream.h"
#include "server/managed_server.h"

namespace loom::server {

namespace {

// How often a non-streaming request checks that its client is still connected.
constexpr auto kClientCheckInterval = std::chrono::milliseconds(100);

}  // namespace

void wait_for_whole_answer(GenerationJob& job) {
  // Nothing is written until the answer is whole, so a vanished client is noticed by watching its socket.
  const int client = current_client_socket();
  while (!job.all_finished()) {
    job.poll(kClientCheckInterval);
    if (client >= 0 && !job.all_finished() && peer_has_closed(client)) {
      job.cancel_unfinished(CancelReason::client_disconnected);
      throw ApiError(499, "the client closed the connection before the answer was ready", std::nullopt, "invalid_request_error",
                     "client_closed_request");
    }
  }
  if (const ChoiceProgress* failed = job.failed_choice()) {
    if (failed->finish == FinishReason::cancelled) {
      throw ApiError(503, "the request was cancelled: the server is shutting down", std::nullopt, "server_error", "shutting_down");
    }
    throw ApiError(500, "generation failed: " + failed->error, std::nullopt, "server_error");
  }
}

}  // namespace loom::server
