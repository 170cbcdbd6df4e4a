// Small helpers every route uses to answer with JSON.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "common/error.h"
#include "config/config.h"
#include "server/api_error.h"
#include "server/managed_server.h"
#include "server/openai_format.h"

namespace loom::server {

inline void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

inline void send_error(httplib::Response& res, const ApiError& error) {
  if (error.retry_after() > 0) res.set_header("Retry-After", std::to_string(error.retry_after()));
  else if (error.status() == 429) res.set_header("Retry-After", "1");
  send_json(res, error.status(), error.body());
}

// Every handler's refusals become OpenAI error bodies; nothing a client sends escapes as a crash.
template <typename Fn>
httplib::Server::Handler guarded(Fn fn) {
  return [fn](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type, read by a translation layer
      send_error(res, ApiError(400, std::string("a field has the wrong type: ") + e.what()));
    } catch (const Error& e) {
      send_error(res, ApiError(400, e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), std::nullopt, "server_error"));
    }
  };
}

// The [server] connection settings as ManagedServer's limits.
inline ConnectionLimits connection_limits(const ServerSettings& settings) {
  ConnectionLimits limits;
  limits.max_connections = settings.max_connections;
  limits.keep_alive_timeout = std::chrono::milliseconds(static_cast<int64_t>(settings.keep_alive_timeout * 1000));
  limits.max_requests_per_connection = settings.keep_alive_max_requests;
  limits.request_read_timeout = std::chrono::milliseconds(static_cast<int64_t>(settings.request_read_timeout * 1000));
  // One worker per request being served: enough for every admissible request to stream at once, plus
  // room for /metrics and /health. Idle connections hold none.
  limits.n_workers = static_cast<size_t>(std::clamp<int64_t>(settings.max_queue, 8, 512) + 16);
  return limits;
}

}  // namespace loom::server
