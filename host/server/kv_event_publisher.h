// KvEventPublisher — the engine's prefix-cache events in vLLM's wire format, for KV-aware routers
// (vllm-router's kv_aware policy, Dynamo, llm-d): each batch is a msgpack array
// [ts, events, data_parallel_rank] whose events are BlockStored / BlockRemoved / AllBlocksCleared
// maps tagged by "type" (vllm/distributed/kv_events.py), sent on a ZMQ PUB socket as the frames
// (topic, 8-byte big-endian sequence number, payload). A ROUTER socket answers replay requests (a
// start sequence number, 8 bytes big-endian) with every buffered batch from there as (topic,
// sequence, payload), then (topic, -1, "").
//
// The engine thread only appends to a queue; one publisher thread owns both sockets, flushes the
// queue as one batch every few milliseconds and serves replays.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "engine/kv_manager.h"

namespace loom::server {

class KvEventPublisher {
 public:
  // Binds (or connects) the sockets now, so a bad endpoint is a startup error naming it.
  KvEventPublisher(const KvEventsSettings& settings, uint32_t block_size);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queue one event (engine thread; never blocks on the network).
  void publish(const KvEvent& event);
  // The PUB socket's bound address (e.g. the port chosen for "tcp://127.0.0.1:*").
  const std::string& endpoint() const { return bound_endpoint_; }
  uint64_t batches_sent() const { return batches_sent_.load(); }

  // The msgpack payload of one batch (exposed for tests).
  static std::string encode_batch(const std::vector<KvEvent>& events, uint32_t block_size, double timestamp);

 private:
  struct Sockets;
  void run();
  void flush(std::vector<KvEvent>& events);
  void serve_replay();

  KvEventsSettings settings_;
  uint32_t block_size_;
  std::unique_ptr<Sockets> sockets_;
  std::string bound_endpoint_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<KvEvent> queue_;
  bool stopping_ = false;

  // Publisher thread only.
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::string>> replay_buffer_;
  std::atomic<uint64_t> batches_sent_{0};
  std::thread thread_;
};

}  // namespace loom::server
