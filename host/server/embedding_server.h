// EmbeddingServer — `loom serve` for an embedding model (a text encoder, e.g. bert): OpenAI's POST
// /v1/embeddings (and llama-server's /embeddings), GET /v1/models, GET /health. Generation routes
// answer 400 naming the model's task; the API key and connection limits are the chat server's.
#pragma once

#include <memory>
#include <string>

#include "config/config.h"
#include "server/embeddings_api.h"

namespace loom::server {

class ManagedServer;

class EmbeddingServer {
 public:
  EmbeddingServer(EmbeddingService& service, const ServerSettings& settings);
  ~EmbeddingServer();
  EmbeddingServer(const EmbeddingServer&) = delete;
  EmbeddingServer& operator=(const EmbeddingServer&) = delete;

  int bind(const std::string& host, int port);  // the bound port; loom::Error when it cannot listen
  void run();                                    // serves until stop()
  void stop();

 private:
  void install_routes();
  EmbeddingService& service_;
  const ServerSettings settings_;
  std::unique_ptr<ManagedServer> http_;
  int64_t created_ = 0;
};

}  // namespace loom::server
