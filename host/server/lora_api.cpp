#include "server/lora_api.h"

#include <nlohmann/json.hpp>

#include "server/http_util.h"
#include "server/openai_parse.h"

namespace loom::server {

namespace {

using nlohmann::json;

// The body's string field `key`: a 400 naming it when it is missing or not a non-empty string.
std::string required_string(const json& body, const char* key) {
  if (!body.contains(key) || !body[key].is_string() || body[key].get<std::string>().empty())
    throw ApiError(400, std::string("'") + key + "' must be a non-empty string", key);
  return body[key].get<std::string>();
}

void require_enabled(const ServerWide& server) {
  if (!server.settings.enable_lora_loading)
    throw ApiError(404, "loading adapters at run time is off ([server] enable_lora_loading = true turns it on)", std::nullopt,
                   "invalid_request_error", "not_enabled");
}

}  // namespace

void add_lora_routes(httplib::Server& http, ModelRegistry& models) {
  // Adapters belong to the first model (several models: [[models]]' first entry), as in vLLM where one
  // server has one base model.
  http.Post("/v1/load_lora_adapter", guarded([&models](const httplib::Request& req, httplib::Response& res) {
              require_enabled(models.server());
              ModelLease model = models.acquire("");
              ServerState& state = *model;
              const json body = parse_json_body(req.body);
              const std::string name = required_string(body, "lora_name"), path = required_string(body, "lora_path");
              double scale = 1.0;
              if (body.contains("scale")) {
                if (!body["scale"].is_number()) throw ApiError(400, "'scale' must be a number", "scale");
                scale = body["scale"].get<double>();
              }
              state.engine.load_lora(name, path, static_cast<float>(scale));  // loom::Error: a 400 naming the problem
              models.remember_adapter({name, path, static_cast<float>(scale)});
              res.set_content("Success: LoRA adapter '" + name + "' added successfully.", "text/plain; charset=utf-8");
            }));
  http.Post("/v1/unload_lora_adapter", guarded([&models](const httplib::Request& req, httplib::Response& res) {
              require_enabled(models.server());
              ModelLease model = models.acquire("");
              ServerState& state = *model;
              const json body = parse_json_body(req.body);
              const std::string name = required_string(body, "lora_name");
              if (!state.engine.find_lora(name))
                throw ApiError(404, "no adapter named '" + name + "' is loaded", "lora_name", "invalid_request_error", "model_not_found");
              state.engine.unload_lora(name);
              models.forget_adapter(name);
              res.set_content("Success: LoRA adapter '" + name + "' removed successfully.", "text/plain; charset=utf-8");
            }));
}

}  // namespace loom::server
