#include "server/managed_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/error.h"
#include "server/connection_stream.h"

namespace loom::server {

namespace {

using namespace std::chrono_literals;

// How often idle connections are checked against their deadlines.
constexpr auto kWatchInterval = 50ms;
// How long a refused connection is read and discarded before it is closed: closing a socket with
// unread input sends a reset, which can destroy the 503 before the client reads it.
constexpr auto kLingerAfterRefusal = 2s;

thread_local int t_current_socket = -1;

// httplib hands each accepted socket to a task queue; this one runs the task at once on the accept
// thread, where ManagedServer::process_and_close_socket only files the socket and returns.
class RunAtOnce final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

std::string refusal_response(int64_t max_connections) {
  const std::string body =
      R"({"error":{"message":"the server already holds )" + std::to_string(max_connections) +
      R"( open connections, its limit ([server] max_connections); retry shortly","type":"server_error","param":null,"code":"too_many_connections"}})";
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
         "Connection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Reads and drops whatever the peer sent; false once it has closed (or the socket failed).
bool discard_input(int sock) {
  char sink[4096];
  for (;;) {
    const ssize_t n = ::recv(sock, sink, sizeof(sink), MSG_DONTWAIT);
    if (n > 0) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
}

}  // namespace

int current_client_socket() { return t_current_socket; }

struct ManagedServer::Connection {
  Connection(int s, std::chrono::milliseconds write_timeout) : sock(s), stream(s, write_timeout) {}
  int sock;
  ConnectionStream stream;
  int64_t n_served = 0;
  SteadyClock::time_point deadline;  // while idle: when it is closed
  bool refused = false;              // answered 503; lingering until the peer closes or the deadline
};

ManagedServer::ManagedServer(ConnectionLimits limits) : limits_(limits) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw Error("cannot create the HTTP server's epoll set: " + std::string(std::strerror(errno)));
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake);
  new_task_queue = [] { return new RunAtOnce(); };
  watcher_ = std::thread([this] { watch_idle_connections(); });
  for (size_t i = 0; i < limits_.n_workers; ++i) workers_.emplace_back([this] { work(); });
}

ManagedServer::~ManagedServer() {
  shut_down();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void ManagedServer::shut_down() {
  std::lock_guard once(shut_down_mutex_);
  if (shut_down_) return;
  shut_down_ = true;
  stop();  // httplib: close the listening socket, which ends the accept loop
  stopping_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
  watcher_.join();
  ready_cv_.notify_all();
  for (auto& worker : workers_) worker.join();
  std::lock_guard lock(idle_mutex_);
  for (auto& [sock, connection] : idle_) {
    if (!connection->refused) --n_open_;
    ::close(sock);
  }
  idle_.clear();
}

ConnectionCounts ManagedServer::counts() const {
  ConnectionCounts c;
  {
    std::lock_guard lock(idle_mutex_);
    for (const auto& [sock, connection] : idle_) c.idle += connection->refused ? 0 : 1;
  }
  c.open = n_open_;
  c.accepted = n_accepted_;
  c.refused = n_refused_;
  c.idle_timeouts = n_idle_timeouts_;
  c.read_timeouts = n_read_timeouts_;
  return c;
}

bool ManagedServer::process_and_close_socket(socket_t sock) {
  ++n_accepted_;
  if (stopping_ || n_open_ >= limits_.max_connections) {
    refuse(sock);
    return true;
  }
  ++n_open_;
  // Streamed tokens are small writes: without TCP_NODELAY, Nagle's algorithm holds each one until
  // the client acknowledges the previous, adding up to a delayed-ACK interval (measured: 11 ms per
  // token at concurrency 1, against 1 ms with it off).
  const int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto connection = std::make_unique<Connection>(sock, limits_.write_timeout);
  connection->deadline = SteadyClock::now() + limits_.request_read_timeout;  // for its first request to start
  park(std::move(connection));
  return true;
}

void ManagedServer::refuse(int sock) {
  ++n_refused_;
  const std::string response = refusal_response(limits_.max_connections);
  [[maybe_unused]] const ssize_t sent = ::send(sock, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(sock, SHUT_WR);
  auto connection = std::make_unique<Connection>(sock, limits_.write_timeout);
  connection->refused = true;
  connection->deadline = SteadyClock::now() + kLingerAfterRefusal;
  park(std::move(connection));
}

void ManagedServer::park(std::unique_ptr<Connection> connection) {
  // Bytes of a pipelined request are already here: no reason to wait for the socket.
  if (!connection->refused && connection->stream.has_buffered_input()) return dispatch(std::move(connection));
  const int sock = connection->sock;
  std::lock_guard lock(idle_mutex_);
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = sock;
  if (stopping_ || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, sock, &event) != 0) {
    if (!connection->refused) --n_open_;
    ::close(sock);
    return;
  }
  idle_[sock] = std::move(connection);
}

void ManagedServer::dispatch(std::unique_ptr<Connection> connection) {
  {
    std::lock_guard lock(ready_mutex_);
    ready_.push_back(std::move(connection));
  }
  ready_cv_.notify_one();
}

void ManagedServer::close_connection(std::unique_ptr<Connection> connection) {
  if (!connection->refused) --n_open_;
  ::close(connection->sock);
}

void ManagedServer::watch_idle_connections() {
  epoll_event events[64];
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, static_cast<int>(kWatchInterval.count()));
    for (int i = 0; i < n; ++i) {
      const int sock = events[i].data.fd;
      if (sock == wake_fd_) continue;
      std::unique_ptr<Connection> connection;
      {
        std::lock_guard lock(idle_mutex_);
        auto it = idle_.find(sock);
        if (it == idle_.end()) continue;
        connection = std::move(it->second);
        idle_.erase(it);
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, sock, nullptr);
      }
      if (!connection->refused) {
        dispatch(std::move(connection));  // a request (or the peer's close) arrived: a worker reads it
      } else if (discard_input(sock) && !(events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        park(std::move(connection));  // keep lingering until the peer closes or the deadline passes
      } else {
        close_connection(std::move(connection));
      }
    }
    close_expired(SteadyClock::now());
  }
}

void ManagedServer::close_expired(SteadyClock::time_point now) {
  std::lock_guard lock(idle_mutex_);
  for (auto it = idle_.begin(); it != idle_.end();) {
    Connection& connection = *it->second;
    if (connection.deadline > now) {
      ++it;
      continue;
    }
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection.sock, nullptr);
    if (!connection.refused) {
      ++n_idle_timeouts_;
      --n_open_;
    }
    ::close(connection.sock);
    it = idle_.erase(it);
  }
}

void ManagedServer::work() {
  for (;;) {
    std::unique_ptr<Connection> connection;
    {
      std::unique_lock lock(ready_mutex_);
      ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (ready_.empty()) return;  // stopping, and nothing left to answer
      connection = std::move(ready_.front());
      ready_.pop_front();
    }
    serve(std::move(connection));
  }
}

void ManagedServer::serve(std::unique_ptr<Connection> connection) {
  ConnectionStream& stream = connection->stream;
  stream.set_read_deadline(SteadyClock::now() + limits_.request_read_timeout);
  const bool last = ++connection->n_served >= limits_.max_requests_per_connection || stopping_;
  bool peer_closed = false;
  t_current_socket = connection->sock;
  bool answered = false;
  try {
    answered = process_request(stream, last, peer_closed, nullptr);
  } catch (const std::exception& e) {
    // httplib catches what handlers throw; this is for httplib itself (an allocation failure, say):
    // the connection is lost, the worker and the server are not.
    std::fprintf(stderr, "loom serve: connection dropped by an internal error: %s\n", e.what());
  }
  t_current_socket = -1;
  if (stream.read_timed_out()) ++n_read_timeouts_;
  if (!answered || peer_closed || last || stream.read_timed_out() || stopping_) {
    close_connection(std::move(connection));
    return;
  }
  connection->deadline = SteadyClock::now() + limits_.keep_alive_timeout;
  park(std::move(connection));
}

}  // namespace loom::server
