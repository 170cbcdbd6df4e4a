// HttpServer — the routes of `loom serve` on cpp-httplib: OpenAI's /v1/completions,
// /v1/chat/completions and /v1/models, plus /health, /tokenize, /detokenize and /metrics. Cross-cutting
// rules live here: bearer API key (all but /health), body size limit (413), JSON errors for every
// failure, per-route counters for /metrics.
#pragma once

#include <memory>
#include <string>

#include "server/managed_server.h"
#include "server/model_registry.h"

namespace loom::server {

class HttpServer {
 public:
  // `takes_images`: a served model reads image parts, so bodies may carry [server]
  // max_images_per_request images beyond max_body_bytes.
  HttpServer(ModelRegistry& models, bool takes_images);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Bind host:port (0 = any free port) and return the port; loom::Error when that fails.
  int bind(const std::string& host, int port);
  // Serve until stop(); returns once every connection has closed.
  void run();
  // Close the listening socket and idle connections, and wait for the requests being served (their
  // writes time out if a client stopped reading), so call it after the requests in flight have
  // finished (ServerWide::n_active_http == 0).
  void stop();

 private:
  void install_routes();
  ModelRegistry& models_;
  std::unique_ptr<ManagedServer> http_;
  int listen_socket_ = -1;
};

}  // namespace loom::server
