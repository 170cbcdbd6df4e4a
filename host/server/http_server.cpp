#include "server/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "server/connection_stream.h"
#include "server/generation.h"
#include "server/http_util.h"
#include "server/metrics_exporter.h"
#include "server/openai_parse.h"
#include "server/sse_stream.h"
#include "server/infill_api.h"
#include "server/lora_api.h"
#include "server/tokenize_api.h"
#include "tokenizer/tokenizer.h"
#include "server/engine_state.h"
#include "server/web_assets.h"
#include "server/whole_answer.h"
#include "server/anthropic_api.h"
#include "server/responses_api.h"

namespace loom::server {

namespace {

using nlohmann::json;

constexpr int kListenBacklog = 1024;

// Route label for /metrics: known paths as they are, anything else as "other" (bounded cardinality).
std::string route_label(const std::string& path) {
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/completions/render",
                            "/v1/chat/completions/render", "/v1/models", "/props", "/health", "/tokenize", "/detokenize", "/metrics",
                            "/get_load", "/get_server_info", "/", "/engine", "/v1/engine/state", "/assets/loom.css",
                            "/assets/loom.js", "/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/infill",
                            "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"}) {
    if (path == known) return known;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// The names a request's "model" may use: the served name first, then the configured aliases.
std::vector<std::string> served_names(const ServerState& state) {
  std::vector<std::string> names = {state.model_name};
  for (const auto& alias : state.settings.model_aliases) {
    if (std::find(names.begin(), names.end(), alias) == names.end()) names.push_back(alias);
  }
  return names;
}

// A request's "model" picks one of the served models (absent: the first), loaded if it is not in
// memory; a wrong name is a 404 listing the names, as OpenAI and vLLM answer, so a client never gets
// another model's output by mistake.
void handle_generation(ModelRegistry& models, const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  ActiveGuard active(models.server());
  GenerationParams params = parse_generation_request(req.body, endpoint);
  ModelLease model = models.acquire(params.model);
  auto job = std::make_shared<GenerationJob>(std::move(model), std::move(params));
  job->submit();
  if (job->params().stream) {
    stream_job(std::move(job), res);
    return;
  }
  wait_for_whole_answer(*job);
  send_json(res, 200, endpoint == Endpoint::chat ? chat_response(*job) : completion_response(*job));
}

// Loom's own field of a model card: which chat template serves /v1/chat/completions. "builtin" means
// the model brought none and Loom's stands in, which the chat page shows as a banner.
json chat_template_card(const ChatTemplateOrigin& origin) {
  switch (origin.kind) {
    case ChatTemplateOrigin::Kind::model: return {{"source", "model"}};
    case ChatTemplateOrigin::Kind::configured: return {{"source", "config"}};
    case ChatTemplateOrigin::Kind::builtin_fallback:
      return {{"source", "builtin"}, {"note", origin.note}, {"may_not_be_instruction_tuned", true}};
  }
  return {{"source", "model"}};
}

// Loom's field of a model card: the KV pool and how many sequences of common lengths fit in it
// (`loom plan` prints the same for a model before it is served).
json kv_card(const EngineInfo& info) {
  json groups = json::array();
  for (const auto& g : info.kv_groups) {
    groups.push_back({{"name", g.name}, {"layers", g.n_layers}, {"window", g.window}, {"bytes_per_token", g.bytes_per_token},
                      {"bytes_per_sequence", g.bytes_per_sequence}});
  }
  json fit = json::object();
  for (uint64_t n : {2048ull, 8192ull, 32768ull}) fit[std::to_string(n)] = info.kv_layout.sequences_of(n);
  json rings = nullptr;
  if (info.kv_window_rings > 0) {
    rings = {{"count", info.kv_window_rings}, {"tokens", info.kv_window_ring_tokens},
             {"checkpoints", info.kv_layout.n_ring_checkpoints}, {"bytes", info.kv_layout.rings_bytes()}};
  }
  return {{"dtype", info.kv_dtype}, {"pool_bytes", info.kv_bytes}, {"block_size", info.kv_block_size},
          {"bytes_per_token", info.kv_bytes_per_token}, {"layer_groups", groups}, {"sequences_that_fit", fit},
          {"window_rings", rings}};
}

json model_card(const ServerState& state, const std::string& name) {
  const json loaded = {{"value", "loaded"}};
  if (const std::optional<Engine::LoraSlot> lora = state.engine.find_lora(name)) {
    // vLLM's card of an adapter: its base as parent, its file as root.
    return {{"id", name},       {"object", "model"}, {"created", state.created}, {"owned_by", "loom"},
            {"root", lora->path}, {"parent", state.model_name}, {"max_model_len", state.engine.info().n_ctx}, {"status", loaded},
            {"loom", {{"lora", {{"scale", lora->scale}, {"rank", lora->rank}}}}}};
  }
  return {{"id", name},
          {"object", "model"},
          {"created", state.created},
          {"owned_by", "loom"},
          {"root", state.model_name},
          {"max_model_len", state.engine.info().n_ctx},
          {"status", loaded},
          // Ollama's word for what the model takes: "vision" when image parts are accepted.
          {"capabilities", state.engine.takes_images() ? json{"completion", "chat", "vision"} : json{"completion", "chat"}},
          {"loom", {{"chat_template", chat_template_card(state.template_origin)},
                    {"kv", kv_card(state.engine.info())},
                    {"vision", state.engine.takes_images() ? json{{"mmproj", state.engine.info().mmproj_path},
                                                                  {"projector", state.engine.info().projector},
                                                                  {"image_rows", state.engine.info().image_rows},
                                                                  {"max_images_per_request", state.settings.max_images_per_request}}
                                                           : json(nullptr)}}}};
}

// A model that is not in memory: what its entry says, and its state as llama-server's router mode
// shows it ("unloaded", "loading", "unloading").
json entry_card(const ModelView& view, const std::string& name, int64_t created) {
  json status = {{"value", model_status_name(view.status)}};
  if (!view.last_error.empty()) status["failed"] = view.last_error;
  return {{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "loom"}, {"root", view.name}, {"status", status},
          {"loom", {{"memory_bytes", view.bytes}}}};
}

// Every name a request may use, each with its card: every model and alias, and the adapters of the
// models in memory.
json model_cards(ModelRegistry& models) {
  json cards = json::array();
  for (const ModelView& view : models.models()) {
    if (view.state) {
      for (const auto& name : served_names(*view.state)) cards.push_back(model_card(*view.state, name));
      for (const auto& lora : view.state->engine.loras()) cards.push_back(model_card(*view.state, lora.name));
      continue;
    }
    cards.push_back(entry_card(view, view.name, models.server().created));
    for (const auto& alias : view.aliases) cards.push_back(entry_card(view, alias, models.server().created));
  }
  return cards;
}

// llama-server's GET /props (its web UI and several clients read it): the defaults a request without
// sampling parameters gets, which include the model's recommended sampling (model_sampling.h).
json props(const ServerState& state) {
  const loom_sampling_params& d = state.engine.default_sampling();
  const EngineInfo& info = state.engine.info();
  return {{"default_generation_settings",
           {{"n_ctx", info.n_ctx},
            {"params", {{"temperature", d.temperature}, {"top_k", d.top_k}, {"top_p", d.top_p}, {"min_p", d.min_p},
                        {"typical_p", d.typical_p}, {"repeat_penalty", d.repetition_penalty}, {"repeat_last_n", d.penalty_last_n},
                        {"frequency_penalty", d.frequency_penalty}, {"presence_penalty", d.presence_penalty}}}}},
          {"total_slots", info.max_num_seqs},
          {"model_path", info.model_path},
          {"modalities", {{"vision", state.engine.takes_images()}, {"audio", false}}}};
}

// vLLM's POST /v1/completions/render and /v1/chat/completions/render: the prompt's token ids, as
// generation would run them. vllm-router's kv_aware policy asks every candidate worker for them
// and matches the ids against the blocks each worker published. A request's "model" may be absent.
void handle_render(ModelRegistry& models, const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  GenerationParams params = parse_generation_request(req.body, endpoint);
  ModelLease model = models.acquire(params.model);
  GenerationJob job(std::move(model), std::move(params));
  const auto& prompts = job.render();
  send_json(res, 200, {{"token_ids", prompts.front().tokens}, {"count", prompts.front().tokens.size()}});
}

// The body's "model", when it names one (tokenize and detokenize take it as vLLM does); "" = the first.
std::string requested_model(const json& body) {
  if (!body.is_object() || !body.contains("model") || body["model"].is_null()) return "";
  if (!body["model"].is_string()) throw invalid_param("model", "'model' must be a string");
  return body["model"].get<std::string>();
}

void handle_tokenize(ModelRegistry& models, const httplib::Request& req, httplib::Response& res) {
  // vLLM's forms, {"prompt"} and {"messages"}: the ids generation would run, with vLLM's reply.
  const json body = parse_json_body(req.body);
  ModelLease model = models.acquire(requested_model(body));
  if (body.is_object() && !body.contains("content") && (body.contains("prompt") || body.contains("messages"))) {
    GenerationParams params = parse_generation_request(req.body, body.contains("messages") ? Endpoint::chat : Endpoint::completions);
    const int64_t n_ctx = model->engine.info().n_ctx;
    GenerationJob job(std::move(model), std::move(params));
    const auto& tokens = job.render().front().tokens;
    send_json(res, 200, {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", n_ctx}});
    return;
  }
  send_json(res, 200, tokenize_reply(model->engine.tokenizer(), body));
}

void handle_detokenize(ModelRegistry& models, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req.body);
  ModelLease model = models.acquire(requested_model(body));
  send_json(res, 200, detokenize_reply(model->engine.tokenizer(), body));
}

// The model a GET names with ?model= (llama-server's router mode), else the first.
std::string query_model(const httplib::Request& req) { return req.has_param("model") ? req.get_param_value("model") : ""; }

}  // namespace

HttpServer::HttpServer(ModelRegistry& models, bool takes_images)
    : models_(models), http_(std::make_unique<ManagedServer>(connection_limits(models.server().settings))) {
  const ServerSettings& settings = models_.server().settings;
  // A vision model's requests carry images as base64 (4 bytes per 3): room for the allowed number of them.
  uint64_t body_limit = uint64_t(settings.max_body_bytes);
  if (takes_images)
    body_limit = std::max<uint64_t>(body_limit, uint64_t(settings.max_images_per_request) * uint64_t(settings.max_image_bytes) / 3 * 4 +
                                                    (1u << 20));
  http_->set_payload_max_length(static_cast<size_t>(body_limit));
  // What httplib advertises in its Keep-Alive header; ManagedServer enforces both.
  http_->set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>(settings.keep_alive_timeout)));
  http_->set_keep_alive_max_count(static_cast<size_t>(settings.keep_alive_max_requests));
  // httplib listens with a backlog of 5: a burst of connections overflows it and the kernel drops
  // SYNs, which clients retry only after a second. Remember the socket to raise the backlog in bind().
  http_->set_socket_options([this](int sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = sock;
  });
  ManagedServer* server = http_.get();
  models_.server().connection_counts = [server] { return server->counts(); };
  install_routes();
}

HttpServer::~HttpServer() {
  http_->shut_down();
  models_.server().connection_counts = nullptr;
}

int HttpServer::bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
  } else if (!http_->bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound < 0) throw Error("cannot listen on " + host + ":" + std::to_string(port) + " (in use, or not a local address?)");
  if (listen_socket_ >= 0) ::listen(listen_socket_, kListenBacklog);  // Linux updates a listening socket's backlog
  return bound;
}

void HttpServer::run() { http_->listen_after_bind(); }

void HttpServer::stop() { http_->shut_down(); }

void HttpServer::install_routes() {
  ModelRegistry& models = models_;
  ServerWide& state = models_.server();
  http_->set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    // The pages and their assets carry no data: they load without the key and ask for it on a 401.
    if (state.settings.api_key.empty() || req.path == "/health" || req.path == "/" || req.path == "/engine" ||
        req.path.rfind("/assets/", 0) == 0) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string expected = "Bearer " + state.settings.api_key;
    if (req.get_header_value("Authorization") == expected) return httplib::Server::HandlerResponse::Unhandled;
    // Anthropic's clients send the key as x-api-key.
    if (req.get_header_value("x-api-key") == state.settings.api_key) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    // The body was not read; do not let it be parsed as the next request on this connection.
    res.set_header("Connection", "close");
    const bool sent = req.has_header("Authorization") || req.has_header("x-api-key");
    const ApiError refusal(401, sent ? "incorrect API key" : "missing API key: send 'Authorization: Bearer <key>' (or x-api-key)",
                           std::nullopt, "invalid_request_error", "invalid_api_key");
    if (req.path.rfind("/v1/messages", 0) == 0) send_anthropic_error(res, refusal);
    else send_error(res, refusal);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Failures httplib answers itself (unknown route, 413, malformed HTTP) get a JSON body too.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status);
    std::optional<std::string> code;
    if (res.status == 404) {
      message = "no route " + req.method + " " + req.path;
      code = "not_found";
    } else if (res.status == 413) {
      message = "the request body is larger than the server's limit ([server] max_body_bytes)";
      code = "request_too_large";
    } else if (res.status == 405) {
      message = "method " + req.method + " is not allowed on " + req.path;
    } else if (res.status == 400) {
      message = "malformed HTTP request";
    }
    res.set_content(dump_json(ApiError::error_body(message, "invalid_request_error", std::nullopt, code)),
                    "application/json");
  });
  http_->set_logger([&state](const httplib::Request& req, const httplib::Response& res) {
    state.http_counters.count(route_label(req.path), res.status);
  });

  http_->Post("/v1/completions", guarded([&models](const httplib::Request& req, httplib::Response& res) {
                handle_generation(models, req, res, Endpoint::completions);
              }));
  http_->Post("/v1/chat/completions", guarded([&models](const httplib::Request& req, httplib::Response& res) {
                handle_generation(models, req, res, Endpoint::chat);
              }));
  http_->Post("/v1/completions/render", guarded([&models](const httplib::Request& req, httplib::Response& res) {
    handle_render(models, req, res, Endpoint::completions);
  }));
  http_->Post("/v1/chat/completions/render", guarded([&models](const httplib::Request& req, httplib::Response& res) {
    handle_render(models, req, res, Endpoint::chat);
  }));
  http_->Get("/v1/models", guarded([&models](const httplib::Request&, httplib::Response& res) {
               send_json(res, 200, {{"object", "list"}, {"data", model_cards(models)}});
             }));
  http_->Get(R"(/v1/models/(.+))", guarded([&models](const httplib::Request& req, httplib::Response& res) {
               const std::string name = req.matches[1];
               for (const json& card : model_cards(models)) {
                 if (card["id"] == name) return send_json(res, 200, card);
               }
               std::string listed;
               for (const auto& known : models.names()) listed += (listed.empty() ? "'" : ", '") + known + "'";
               throw ApiError(404, "the model '" + name + "' does not exist; this server serves " + listed, "model",
                              "invalid_request_error", "model_not_found");
             }));
  http_->Get("/props", guarded([&models](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, props(*models.acquire(query_model(req))));
  }));
  http_->Get("/health", guarded([&state](const httplib::Request&, httplib::Response& res) {
               if (state.stopping) {
                 send_json(res, 503, {{"status", "shutting_down"}});
               } else {
                 send_json(res, 200, {{"status", "ok"}});
               }
             }));
  http_->Get("/", guarded([](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web::chat_page()), "text/html; charset=utf-8");
  }));
  http_->Get("/engine", guarded([](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web::engine_page()), "text/html; charset=utf-8");
  }));
  // What both pages share, one copy each. "no-cache" with an ETag: the browser keeps the file and asks at
  // each page load whether it changed (a bodiless 304 when not), so a new binary's assets take over at once.
  const auto shared_asset = [](std::string_view (*body)(), std::string_view (*etag)(), const char* content_type) {
    return guarded([body, etag, content_type](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("ETag", std::string(etag()));
      if (req.get_header_value("If-None-Match") == etag()) {
        res.status = 304;
        return;
      }
      res.set_content(std::string(body()), content_type);
    });
  };
  http_->Get("/assets/loom.css", shared_asset(web::loom_css, web::loom_css_etag, "text/css; charset=utf-8"));
  http_->Get("/assets/loom.js", shared_asset(web::loom_js, web::loom_js_etag, "text/javascript; charset=utf-8"));
  // The page polls this: it looks at a model in memory and never loads one (which would keep it from
  // ever being idle).
  http_->Get("/v1/engine/state", guarded([&models](const httplib::Request& req, httplib::Response& res) {
    ModelLease model = models.peek(query_model(req));
    for (const ModelView& view : models.models()) {
      if (!model && view.state) model = view.state;
    }
    if (!model) throw ApiError(503, "no model is in memory; a request that names one loads it", std::nullopt, "server_error", "no_model_loaded");
    send_json(res, 200, engine_state(*model));
  }));
  // SGLang/vllm-router's worker description (the router proxies it and reads the block size).
  http_->Get("/get_server_info", guarded([&models](const httplib::Request& req, httplib::Response& res) {
    ModelLease model = models.acquire(query_model(req));
    const EngineInfo& info = model->engine.info();
    send_json(res, 200, {{"model_path", info.model_path}, {"served_model_name", model->model_name},
                         {"max_model_len", info.n_ctx}, {"kv_block_size", info.kv_block_size},
                         {"max_num_seqs", info.max_num_seqs}, {"backend", info.backend_name},
                         {"kv_events", model->settings.kv_events.enabled}});
  }));
  // vllm-router's load figure for a worker (its /get_loads): requests admitted and not finished.
  http_->Get("/get_load", guarded([&models](const httplib::Request&, httplib::Response& res) {
    uint64_t load = 0;
    for (const ModelView& view : models.models()) {
      if (!view.state) continue;
      const EngineStats stats = view.state->engine.stats();
      load += stats.running + stats.waiting;
    }
    send_json(res, 200, {{"load", load}});
  }));
  http_->Post("/tokenize", guarded([&models](const httplib::Request& req, httplib::Response& res) {
                handle_tokenize(models, req, res);
              }));
  http_->Post("/detokenize", guarded([&models](const httplib::Request& req, httplib::Response& res) {
                handle_detokenize(models, req, res);
              }));
  http_->Get("/metrics", guarded([&models](const httplib::Request&, httplib::Response& res) {
               res.set_content(render_metrics(models), "text/plain; version=0.0.4; charset=utf-8");
             }));
  add_lora_routes(*http_, models);
  add_infill_route(*http_, models);
  add_anthropic_routes(*http_, models);
  add_responses_routes(*http_, models);
}

}  // namespace loom::server
