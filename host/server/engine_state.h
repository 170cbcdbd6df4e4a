// GET /v1/engine/state: what the engine is doing now, as JSON for the /engine page (and scripts):
// requests running and waiting, the KV pool (used / cached / free blocks), the prefix cache, token
// counters, the model, backend and plugins. Counters are totals since start; a poller turns them
// into rates.
#pragma once

#include <nlohmann/json.hpp>

#include "server/server_state.h"

namespace loom::server {

nlohmann::json engine_state(const ServerState& state);

}  // namespace loom::server
