// /metrics: Engine::stats() and the server's HTTP counters in the Prometheus text format (0.0.4).
#pragma once

#include <string>

#include "engine/metrics.h"
#include "server/server_state.h"

namespace loom::server {

std::string render_metrics(const EngineStats& stats, const ServerState& state);

}  // namespace loom::server
