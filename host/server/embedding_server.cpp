#include "server/embedding_server.h"

#include <algorithm>
#include <ctime>

#include "common/error.h"
#include "server/api_error.h"
#include "server/http_util.h"
#include "server/tokenize_api.h"
#include "server/managed_server.h"
#include "server/openai_parse.h"

namespace loom::server {

using nlohmann::json;

EmbeddingServer::EmbeddingServer(EmbeddingService& service, const ServerSettings& settings)
    : service_(service), settings_(settings), http_(std::make_unique<ManagedServer>(connection_limits(settings))),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  http_->set_payload_max_length(static_cast<size_t>(settings_.max_body_bytes));
  http_->set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>(settings_.keep_alive_timeout)));
  http_->set_keep_alive_max_count(static_cast<size_t>(settings_.keep_alive_max_requests));
  install_routes();
}

EmbeddingServer::~EmbeddingServer() { http_->shut_down(); }

int EmbeddingServer::bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
  } else if (!http_->bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound < 0) throw Error("cannot listen on " + host + ":" + std::to_string(port) + " (in use, or not a local address?)");
  return bound;
}

void EmbeddingServer::run() { http_->listen_after_bind(); }

void EmbeddingServer::stop() { http_->shut_down(); }

void EmbeddingServer::install_routes() {
  const std::string api_key = settings_.api_key;
  http_->set_pre_routing_handler([api_key](const httplib::Request& req, httplib::Response& res) {
    if (api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + api_key) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");
    send_error(res, ApiError(401, req.has_header("Authorization") ? "incorrect API key" : "missing API key: send 'Authorization: Bearer <key>'",
                             std::nullopt, "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 404) message = "no route " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is larger than the server's limit ([server] max_body_bytes)";
    res.set_content(dump_json(ApiError::error_body(message, "invalid_request_error", std::nullopt, std::nullopt)), "application/json");
  });
  EmbeddingService& service = service_;
  const auto embeddings = guarded([&service](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, service.embeddings(parse_json_body(req.body)));
  });
  http_->Post("/v1/embeddings", embeddings);
  http_->Post("/embeddings", embeddings);  // llama-server's name
  const auto rerank = guarded([&service](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, service.rerank(parse_json_body(req.body)));
  });
  http_->Post("/v1/rerank", rerank);
  http_->Post("/rerank", rerank);
  const auto score = guarded([&service](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, service.score(parse_json_body(req.body)));
  });
  http_->Post("/v1/score", score);
  http_->Post("/score", score);  // vLLM's names
  const int64_t created = created_;
  const auto card = [&service, created] {
    const embed::TextEncoderInfo& m = service.info();
    return json{{"id", service.model_name()}, {"object", "model"}, {"created", created}, {"owned_by", "loom"},
                {"loom", {{"task", service.is_reranker() ? "rerank" : "embedding"}, {"architecture", m.arch}, {"dimensions", m.pooled_dim}, {"max_input_tokens", m.n_ctx_train},
                          {"pooling", embed::pooling_name(m.pooling)}}}};
  };
  http_->Get("/v1/models", guarded([card](const httplib::Request&, httplib::Response& res) {
               send_json(res, 200, {{"object", "list"}, {"data", json::array({card()})}});
             }));
  http_->Get("/health", guarded([](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); }));
  // The model's tokenizer, as the chat server's: the ids an input costs, before sending it.
  http_->Post("/tokenize", guarded([&service](const httplib::Request& req, httplib::Response& res) {
                send_json(res, 200, tokenize_reply(service.tokenizer(), parse_json_body(req.body)));
              }));
  http_->Post("/detokenize", guarded([&service](const httplib::Request& req, httplib::Response& res) {
                send_json(res, 200, detokenize_reply(service.tokenizer(), parse_json_body(req.body)));
              }));
  // An embedding model generates nothing: say so by name rather than 404.
  const auto wrong_task = guarded([&service](const httplib::Request& req, httplib::Response&) {
    const bool reranker = service.is_reranker();
    throw ApiError(400, "model '" + service.model_name() + "' is " + (reranker ? "a reranker (task: rerank); it serves POST /v1/rerank" :
                                                                    "an embedding model (task: embedding); it serves POST /v1/embeddings") +
                            ", not " + req.path,
                   "model", "invalid_request_error", "model_not_supported");
  });
  http_->Post("/v1/chat/completions", wrong_task);
  http_->Post("/v1/completions", wrong_task);
}

}  // namespace loom::server
