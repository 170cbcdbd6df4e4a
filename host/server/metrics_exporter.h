// /metrics: Engine::stats() and the server's HTTP counters in the Prometheus text format (0.0.4).
#pragma once

#include <string>

#include "engine/metrics.h"
#include "server/model_registry.h"

namespace loom::server {

// Engine figures carry a model="NAME" label, one sample per model in memory; the HTTP and connection
// figures are the server's own.
std::string render_metrics(ModelRegistry& models);

}  // namespace loom::server
