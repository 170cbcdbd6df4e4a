// ConnectionStream — httplib's view of one client socket while a request on it is served, with the
// limits httplib 0.11 cannot express: the whole request (headers and body) must arrive before a
// deadline, so a client that trickles bytes cannot hold a worker thread for long; writes give up after
// a timeout. It buffers reads (httplib parses headers a byte at a time) and keeps what it read past the
// current request for the next one on the connection (pipelining).
#pragma once

#include <chrono>
#include <string>

#include <httplib.h>

namespace loom::server {

using SteadyClock = std::chrono::steady_clock;

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, std::chrono::milliseconds write_timeout) : sock_(sock), write_timeout_(write_timeout) {}

  // Reads after `deadline` fail, which ends the request being read.
  void set_read_deadline(SteadyClock::time_point deadline) { read_deadline_ = deadline; }
  // Bytes already read from the socket and not yet consumed (the start of a pipelined request).
  bool has_buffered_input() const { return buffer_begin_ < buffer_.size(); }
  // A read failed because the deadline passed (the request did not arrive in time).
  bool read_timed_out() const { return read_timed_out_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return sock_; }

 private:
  int sock_;
  std::chrono::milliseconds write_timeout_;
  SteadyClock::time_point read_deadline_ = SteadyClock::time_point::max();
  mutable bool read_timed_out_ = false;
  std::string buffer_;
  size_t buffer_begin_ = 0;
};

// True when the peer has closed or reset the connection (a pending pipelined request is not a close).
bool peer_has_closed(int sock);

}  // namespace loom::server
