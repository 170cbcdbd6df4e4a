// ManagedServer — cpp-httplib's server with the connection handling of an event-driven one.
//
// httplib 0.11 (Debian 12) gives every accepted connection a thread until it closes, so a few hundred
// idle keep-alive sockets starve every request behind them. Here a connection holds a worker thread only
// while it has a request to read or answer: before its first request and between keep-alive requests it
// waits in one epoll set. Every resource a client can hold is bounded:
//   - open connections: past max_connections a new one is answered 503 and closed;
//   - an idle connection: closed after request_read_timeout (before its first request) or
//     keep_alive_timeout (between requests);
//   - a request: its headers and body must arrive within request_read_timeout of its first byte;
//   - a connection: at most max_requests_per_connection requests, then "Connection: close";
//   - a reader that stops reading: writes fail after write_timeout.
// Requests are parsed and routed by httplib itself (Server::process_request); only the socket's life
// around them is managed here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace loom::server {

struct ConnectionLimits {
  int64_t max_connections = 1024;
  std::chrono::milliseconds keep_alive_timeout{5000};
  int64_t max_requests_per_connection = 100;
  std::chrono::milliseconds request_read_timeout{10000};
  std::chrono::milliseconds write_timeout{5000};
  size_t n_workers = 64;  // requests served at once (a stream holds its worker until its last byte)
};

struct ConnectionCounts {
  int64_t open = 0;    // accepted and not yet closed: idle, waiting for a worker, or being served
  int64_t idle = 0;    // waiting for their next request, holding no thread
  uint64_t accepted = 0;
  uint64_t refused = 0;         // over max_connections: answered 503
  uint64_t idle_timeouts = 0;   // closed after waiting too long for a request
  uint64_t read_timeouts = 0;   // a request that did not arrive in full within request_read_timeout
};

// The socket of the request the calling thread is handling, -1 outside a request handler. A handler
// that waits long (a non-streaming generation) polls it to notice a client that has gone.
int current_client_socket();

class ManagedServer : public httplib::Server {
 public:
  explicit ManagedServer(ConnectionLimits limits);
  ~ManagedServer() override;
  ManagedServer(const ManagedServer&) = delete;
  ManagedServer& operator=(const ManagedServer&) = delete;

  // Stop listening, close idle connections and wait for the requests being served (bounded by the
  // write timeout for clients that stopped reading). Safe to call more than once.
  void shut_down();
  ConnectionCounts counts() const;

 private:
  struct Connection;

  // Called by httplib's accept loop for each new socket (on that thread: see the constructor).
  bool process_and_close_socket(socket_t sock) override;

  void refuse(int sock);
  void park(std::unique_ptr<Connection> connection);
  void dispatch(std::unique_ptr<Connection> connection);
  void close_connection(std::unique_ptr<Connection> connection);
  void serve(std::unique_ptr<Connection> connection);
  void watch_idle_connections();
  void close_expired(std::chrono::steady_clock::time_point now);
  void work();

  const ConnectionLimits limits_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd in the epoll set: wakes the watcher to stop
  std::atomic<bool> stopping_{false};
  bool shut_down_ = false;
  std::mutex shut_down_mutex_;

  mutable std::mutex idle_mutex_;
  std::map<int, std::unique_ptr<Connection>> idle_;  // by socket; watched by epoll

  std::mutex ready_mutex_;
  std::condition_variable ready_cv_;
  std::deque<std::unique_ptr<Connection>> ready_;  // a request has arrived; waiting for a worker

  std::atomic<int64_t> n_open_{0};
  std::atomic<uint64_t> n_accepted_{0}, n_refused_{0}, n_idle_timeouts_{0}, n_read_timeouts_{0};

  std::thread watcher_;
  std::vector<std::thread> workers_;
};

}  // namespace loom::server
