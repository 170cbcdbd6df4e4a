#include "server/kv_event_publisher.h"

#include <chrono>

#include <msgpack.hpp>
#include <zmq.hpp>

#include "common/error.h"

namespace loom::server {

namespace {

// How often queued events go out as one batch: about one engine step, like vLLM's per-step batches.
constexpr auto kFlushInterval = std::chrono::milliseconds(5);

// vLLM's medium of blocks in the engine's own KV memory (MEDIUM_GPU); routers rank other tiers
// (CPU offload, disk) below it.
constexpr const char* kMedium = "GPU";

std::string big_endian(int64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(v) & 0xff);
    v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8);
  }
  return out;
}

int64_t from_big_endian(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const uint8_t*>(m.data());
  for (size_t i = 0; i < m.size() && i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<int64_t>(v);
}

// mode "auto" is vLLM's rule: bind when the endpoint has a wildcard or is ipc/inproc, else connect
// (to a relay that binds). Routers that subscribe to workers (vllm-router) need "bind".
bool should_bind(const KvEventsSettings& settings) {
  if (settings.mode != "auto") return settings.mode == "bind";
  const std::string& e = settings.endpoint;
  return e.find('*') != std::string::npos || e.find("::") != std::string::npos || e.rfind("ipc://", 0) == 0 ||
         e.rfind("inproc://", 0) == 0;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  std::unique_ptr<zmq::socket_t> replay;
};

std::string KvEventPublisher::encode_batch(const std::vector<KvEvent>& events, uint32_t block_size, double timestamp) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  // The batch is an array [ts, events, data_parallel_rank] (vLLM's array_like EventBatch, the only
  // form vllm-router decodes); each event is a map tagged by "type" with every field that has no
  // default in vLLM's Struct (lora_id, medium, lora_name are written as nil when unset).
  pk.pack_array(3);
  pk.pack_double(timestamp);
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const KvEvent& e : events) {
    switch (e.type) {
      case LOOM_KV_EVENT_BLOCK_STORED:
        pk.pack_map(8);
        pk.pack("type");
        pk.pack("BlockStored");
        pk.pack("block_hashes");
        pk.pack_array(1);
        pk.pack_uint64(e.block_hash);
        pk.pack("parent_block_hash");
        if (e.parent_hash) pk.pack_uint64(*e.parent_hash);
        else pk.pack_nil();
        pk.pack("token_ids");
        pk.pack_array(static_cast<uint32_t>(e.tokens.size()));
        for (int32_t t : e.tokens) pk.pack_int32(t);
        pk.pack("block_size");
        pk.pack_uint32(block_size);
        pk.pack("lora_id");
        if (e.lora_id) pk.pack_int64(*e.lora_id);
        else pk.pack_nil();
        pk.pack("medium");
        pk.pack(kMedium);
        pk.pack("lora_name");
        if (e.lora_id) pk.pack(e.lora_name);
        else pk.pack_nil();
        break;
      case LOOM_KV_EVENT_BLOCK_REMOVED:
        pk.pack_map(3);
        pk.pack("type");
        pk.pack("BlockRemoved");
        pk.pack("block_hashes");
        pk.pack_array(1);
        pk.pack_uint64(e.block_hash);
        pk.pack("medium");
        pk.pack(kMedium);
        break;
      default:
        pk.pack_map(1);
        pk.pack("type");
        pk.pack("AllBlocksCleared");
        break;
    }
  }
  pk.pack_int32(0);  // data_parallel_rank
  return std::string(buffer.data(), buffer.size());
}

KvEventPublisher::KvEventPublisher(const KvEventsSettings& settings, uint32_t block_size)
    : settings_(settings), block_size_(block_size), sockets_(std::make_unique<Sockets>()) {
  try {
    sockets_->pub.set(zmq::sockopt::sndhwm, 100000);
    if (should_bind(settings)) {
      sockets_->pub.bind(settings.endpoint);
      bound_endpoint_ = sockets_->pub.get(zmq::sockopt::last_endpoint);
    } else {
      sockets_->pub.connect(settings.endpoint);
      bound_endpoint_ = settings.endpoint;
    }
  } catch (const zmq::error_t& e) {
    throw Error("[server.kv_events] endpoint \"" + settings.endpoint + "\": " + e.what());
  }
  if (!settings.replay_endpoint.empty()) {
    try {
      sockets_->replay = std::make_unique<zmq::socket_t>(sockets_->context, zmq::socket_type::router);
      sockets_->replay->bind(settings.replay_endpoint);
    } catch (const zmq::error_t& e) {
      throw Error("[server.kv_events] replay_endpoint \"" + settings.replay_endpoint + "\": " + e.what());
    }
  }
  // A (re)started replica holds nothing: the first batch says so, and a router that knew this
  // worker's blocks from before a crash drops them.
  KvEvent cleared;
  cleared.type = LOOM_KV_EVENT_ALL_BLOCKS_CLEARED;
  queue_.push_back(cleared);
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::publish(const KvEvent& event) {
  std::lock_guard lock(mutex_);
  queue_.push_back(event);
}

void KvEventPublisher::run() {
  std::vector<KvEvent> events;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, kFlushInterval, [&] { return stopping_; });
      events.swap(queue_);
      if (stopping_ && events.empty()) break;
    }
    if (!events.empty()) flush(events);
    events.clear();
    if (sockets_->replay) serve_replay();
  }
}

void KvEventPublisher::flush(std::vector<KvEvent>& events) {
  std::string payload = encode_batch(events, block_size_, unix_seconds());
  const uint64_t seq = next_seq_++;
  try {
    sockets_->pub.send(zmq::buffer(settings_.topic), zmq::send_flags::sndmore);
    sockets_->pub.send(zmq::buffer(big_endian(static_cast<int64_t>(seq))), zmq::send_flags::sndmore);
    sockets_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
    ++batches_sent_;
  } catch (const zmq::error_t&) {
    // A PUB socket drops rather than blocks; a send error here is a closed context. The batch
    // stays in the replay buffer, where a subscriber can still fetch it.
  }
  replay_buffer_.emplace_back(seq, std::move(payload));
  while (replay_buffer_.size() > static_cast<size_t>(settings_.buffer_steps)) replay_buffer_.pop_front();
}

void KvEventPublisher::serve_replay() {
  zmq::socket_t& replay = *sockets_->replay;
  for (;;) {
    std::vector<zmq::message_t> frames;
    zmq::message_t frame;
    if (!replay.recv(frame, zmq::recv_flags::dontwait)) return;
    frames.push_back(std::move(frame));
    while (replay.get(zmq::sockopt::rcvmore)) {
      zmq::message_t more;
      (void)replay.recv(more, zmq::recv_flags::none);
      frames.push_back(std::move(more));
    }
    // Request: [client identity, empty delimiter, start sequence]. Each reply repeats the live
    // stream's frames (topic, sequence, payload) after the identity and delimiter, as vllm-router
    // reads them; the end marker is sequence -1 with an empty payload.
    if (frames.size() != 3) continue;
    const int64_t start = from_big_endian(frames[2]);
    const std::string client = frames[0].to_string();
    auto reply = [&](int64_t seq, const std::string& payload) {
      replay.send(zmq::buffer(client), zmq::send_flags::sndmore);
      replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(settings_.topic), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(big_endian(seq)), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(payload), zmq::send_flags::none);
    };
    for (const auto& [seq, payload] : replay_buffer_) {
      if (static_cast<int64_t>(seq) >= start) reply(static_cast<int64_t>(seq), payload);
    }
    reply(-1, "");
  }
}

}  // namespace loom::server
