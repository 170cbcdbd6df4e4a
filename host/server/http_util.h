// Small helpers every route uses to answer with JSON.
#pragma once

#include <httplib.h>

#include "server/api_error.h"
#include "server/openai_format.h"

namespace loom::server {

inline void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

inline void send_error(httplib::Response& res, const ApiError& error) {
  if (error.status() == 429) res.set_header("Retry-After", "1");
  send_json(res, error.status(), error.body());
}

}  // namespace loom::server
