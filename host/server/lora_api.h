// vLLM's runtime adapter endpoints, POST /v1/load_lora_adapter {"lora_name", "lora_path"[, "scale"]} and
// POST /v1/unload_lora_adapter {"lora_name"}, behind the API key like every other endpoint, and only
// with [server] enable_lora_loading (vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING); answered in vLLM's plain
// text. Unloading waits for the requests running through the adapter.
#pragma once

#include <httplib.h>

#include "server/model_registry.h"

namespace loom::server {

void add_lora_routes(httplib::Server& http, ModelRegistry& models);

}  // namespace loom::server
