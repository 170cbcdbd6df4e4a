#include "server/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace loom::server {

namespace {

constexpr size_t kReadChunk = 4096;

// poll() for `events` until `deadline`; > 0 when ready, 0 on timeout, < 0 on error.
int wait_for(int sock, short events, SteadyClock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 60'000)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && left > 60'000) continue;  // a far deadline: poll in one-minute slices
    return r;
  }
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(addr);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    port = ntohs(v4.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(addr);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

}  // namespace

bool ConnectionStream::is_readable() const {
  if (has_buffered_input()) return true;
  const int ready = wait_for(sock_, POLLIN, read_deadline_);
  if (ready == 0) read_timed_out_ = true;
  return ready > 0;
}

bool ConnectionStream::is_writable() const {
  return wait_for(sock_, POLLOUT, SteadyClock::now() + write_timeout_) > 0;
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (!has_buffered_input()) {
    if (!is_readable()) return -1;  // past the request's deadline, or an error
    if (size >= kReadChunk) return ::recv(sock_, ptr, size, 0);
    buffer_.resize(kReadChunk);
    const ssize_t n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
    buffer_.resize(n > 0 ? static_cast<size_t>(n) : 0);
    buffer_begin_ = 0;
    if (n <= 0) return n;
  }
  const size_t n = std::min(size, buffer_.size() - buffer_begin_);
  std::memcpy(ptr, buffer_.data() + buffer_begin_, n);
  buffer_begin_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  return ::send(sock_, ptr, size, MSG_NOSIGNAL);
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

bool peer_has_closed(int sock) {
  pollfd p{sock, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte;
  return ::recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace loom::server
