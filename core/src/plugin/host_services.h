// The host-services table the core passes to every plugin: logging and host allocation, plus the
// model_* slots a drafter uses to run a model through the core (installed by the engine).
#pragma once

#include "loom/abi.h"

namespace loom {

// A process-wide table with logging (to stderr, at or above the level set by LOOM_LOG) and
// allocation. Its model_* slots are NULL. Valid for the whole process.
const loom_host_services* default_host_services();

// The minimum level that default_host_services() prints; LOOM_LOG_WARN unless LOOM_LOG says
// debug/info/warn/error.
void set_log_level(loom_log_level level);

}  // namespace loom
