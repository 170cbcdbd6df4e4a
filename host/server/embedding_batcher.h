// EmbeddingBatcher — runs the inputs of concurrent requests through one embedder together. A request's
// inputs join a queue; whichever waiting request finds the embedder idle takes everything queued (with
// its normalisation) and runs it as one list, which the embedder packs into batches of up to its
// max_tokens rows. So sixteen clients sending one input each fill one batch, not sixteen batches of one
// input (the matmuls of a batch of 50 rows run at a fraction of the speed of one of 2,000).
//
// An input's vector does not depend on what else ran in its batch (each attends only to its own rows),
// so batching changes no answer. When a combined run fails, each request runs again alone, so an error
// names that request's own input and the other requests still get their vectors.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include "embed/embedder.h"

namespace loom::server {

class EmbeddingBatcher {
 public:
  explicit EmbeddingBatcher(embed::Embedder& embedder) : embedder_(embedder) {}

  // Embedder::embed for one request's inputs, run together with whatever else is queued; blocks until
  // they are done. Rethrows the embedder's error for this request's inputs.
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize);

  // Runs of the embedder and requests served, for tests and the log: requests / runs is the batching.
  struct Stats {
    int64_t runs = 0, requests = 0;
  };
  Stats stats() const;

 private:
  struct Job {
    const std::vector<std::vector<int32_t>>* inputs = nullptr;
    bool normalize = false;
    std::vector<std::vector<float>> out;
    std::exception_ptr error;
    bool done = false;
  };
  void run(const std::vector<Job*>& jobs) noexcept;

  embed::Embedder& embedder_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::deque<Job*> queue_;
  bool running_ = false;
  Stats stats_;
};

}  // namespace loom::server
