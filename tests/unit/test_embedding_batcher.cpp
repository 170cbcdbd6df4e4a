// EmbeddingBatcher: concurrent requests' inputs run through the embedder together, each request gets
// exactly its own vectors back, and one request's bad input fails that request alone.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "embed/text_encoder.h"
#include "server/embedding_batcher.h"

using namespace loom;

namespace {

// An embedder whose vector for an input is (first token, length, normalize): what it was given shows in
// what comes back. Each call takes a few milliseconds, as a real batch does, so requests queue up.
class RecordingEmbedder : public embed::Embedder {
 public:
  const embed::TextEncoderInfo& info() const override { return info_; }
  int64_t max_tokens() const override { return 4096; }
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) override {
    calls++;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < inputs.size(); i++) {
      if (inputs[i].empty()) throw Error("input " + std::to_string(i) + ": it holds no tokens");
      out.push_back({float(inputs[i][0]), float(inputs[i].size()), normalize ? 1.0f : 0.0f});
    }
    return out;
  }
  std::atomic<int> calls{0};

 private:
  embed::TextEncoderInfo info_;
};

}  // namespace

TEST_CASE("embedding batcher: concurrent requests share runs and get their own vectors back", "[embed][server]") {
  RecordingEmbedder embedder;
  server::EmbeddingBatcher batcher(embedder);
  constexpr int kRequests = 16;
  std::vector<std::vector<std::vector<float>>> answers(kRequests);
  std::vector<std::thread> clients;
  for (int r = 0; r < kRequests; r++)
    clients.emplace_back([&, r] {
      // Request r sends r % 3 + 1 inputs starting with token 100 r + i; half ask for normalised vectors.
      std::vector<std::vector<int32_t>> inputs;
      for (int i = 0; i < r % 3 + 1; i++) inputs.push_back(std::vector<int32_t>(size_t(i + 1), 100 * r + i));
      answers[size_t(r)] = batcher.embed(inputs, r % 2 == 0);
    });
  for (std::thread& c : clients) c.join();
  for (int r = 0; r < kRequests; r++) {
    REQUIRE(answers[size_t(r)].size() == size_t(r % 3 + 1));
    for (int i = 0; i < r % 3 + 1; i++)
      CHECK(answers[size_t(r)][size_t(i)] == std::vector<float>{float(100 * r + i), float(i + 1), r % 2 == 0 ? 1.0f : 0.0f});
  }
  const server::EmbeddingBatcher::Stats stats = batcher.stats();
  CHECK(stats.requests == kRequests);
  INFO(stats.runs << " runs for " << kRequests << " requests");
  CHECK(stats.runs == embedder.calls.load());
  CHECK(stats.runs < kRequests);  // 16 clients at once: runs take several requests each
}

TEST_CASE("embedding batcher: a bad input fails its own request only", "[embed][server]") {
  RecordingEmbedder embedder;
  server::EmbeddingBatcher batcher(embedder);
  std::atomic<int> failed{0}, served{0};
  std::vector<std::thread> clients;
  for (int r = 0; r < 8; r++)
    clients.emplace_back([&, r] {
      std::vector<std::vector<int32_t>> inputs = {{1, 2, 3}, {4}};
      if (r == 3) inputs.push_back({});  // its third input is empty
      try {
        const auto out = batcher.embed(inputs, true);
        CHECK(out.size() == 2);
        served++;
      } catch (const Error& e) {
        CHECK(r == 3);
        // The request's own numbering: its input 2, not the input's place in a combined run.
        CHECK(std::string(e.what()) == "input 2: it holds no tokens");
        failed++;
      }
    });
  for (std::thread& c : clients) c.join();
  CHECK(failed == 1);
  CHECK(served == 7);
}

TEST_CASE("embedding batcher: an embedder that returns too few vectors fails the requests, and the next ones are served", "[embed][server]") {
  class ShortEmbedder : public RecordingEmbedder {
   public:
    std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) override {
      auto out = RecordingEmbedder::embed(inputs, normalize);
      if (broken) out.pop_back();
      return out;
    }
    bool broken = true;
  };
  ShortEmbedder embedder;
  server::EmbeddingBatcher batcher(embedder);
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int r = 0; r < 4; r++)
    clients.emplace_back([&] {
      try {
        batcher.embed({{1, 2}, {3}}, true);
      } catch (const std::exception&) {
        failed++;
      }
    });
  for (std::thread& c : clients) c.join();
  CHECK(failed == 4);
  embedder.broken = false;
  CHECK(batcher.embed({{5}}, false).size() == 1);  // not left waiting on a run that never ended
}
