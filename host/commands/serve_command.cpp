// `loom serve`: an OpenAI-compatible HTTP server over the engine (routes in host/server/).
//
// Shutdown: SIGTERM or SIGINT stops admitting work (new requests get 503), lets the requests in flight
// finish within --shutdown-timeout, cancels what is still running after that (its clients get an
// error, never a silently dropped request), closes the listener and exits 0. A second signal skips
// the wait.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "command.h"
#include "common/error.h"
#include "embed/decoder_embedder.h"
#include "embed/text_encoder.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "hf/hf_checkpoint.h"
#include "server/kv_event_publisher.h"
#include "host_options.h"
#include "model/default_model.h"
#include "server/embedding_server.h"
#include "server/http_server.h"
#include "server/model_loader.h"
#include "server/model_registry.h"
#include "server/server_state.h"

namespace loom::host {

namespace {

const char* kUsage =
    "usage: loom serve [options]\n"
    "\n"
    "Serves the model over HTTP with OpenAI's API: POST /v1/completions, POST /v1/chat/completions\n"
    "(stream: true for server-sent events), GET /v1/models, plus GET /health, GET /metrics (Prometheus),\n"
    "POST /tokenize and POST /detokenize. An embedding model (bert, nomic-bert, jina-bert-v2, modern-bert,\n"
    "gemma-embedding, a decoder with a pooling type or [model] pooling) serves POST /v1/embeddings instead.\n"
    "See docs/server.md.\n"
    "\n"
    "options:\n"
    "  --model FILE              GGUF model (default: [model] path, $LOOM_MODEL, $LOOM_CHAT_MODEL, the installed chat model),\n"
    "                            or a Hugging Face folder as published (bert embedders, e.g. all-MiniLM)\n"
    "  --host H                  address to listen on (default: [server] host, 127.0.0.1)\n"
    "  --port P                  port (default: [server] port, 8080; 0 = any free port, printed at start)\n"
    "  --api-key KEY             require 'Authorization: Bearer KEY' (default: [server] api_key)\n"
    "  --max-queue N             unfinished requests admitted before 429 (default: [server] max_queue)\n"
    "  --model-name NAME         name in /v1/models and responses (default: [server] model_name, file stem)\n"
    "  --backend NAME            backend plugin (default: [backend] name)\n"
    "  --threads N               backend threads (default: [backend] threads)\n"
    "  --n-ctx N                 context per sequence (default: [model] n_ctx, the model's)\n"
    "  --shutdown-timeout SEC    how long SIGTERM waits for requests in flight (default 30)\n"
    "  --mmproj FILE             vision projector GGUF: chat image parts (default: [model] mmproj, the mmproj*.gguf beside the model)\n"
    "  --config FILE             loom.toml to read; its [[models]] tables serve several models, each loaded when a\n"
    "                            request names it (docs/server.md, \"Several models\")\n";

int64_t parse_int(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs an integer, got '" + value + "'");
}

// Waits for SIGTERM/SIGINT (blocked in every thread, so only this one sees them) and runs the
// shutdown sequence; returns when the server has been told to stop or `done` is set.
void shutdown_on_signal(server::ModelRegistry& models, server::HttpServer& http, std::atomic<bool>& done,
                        std::chrono::seconds timeout) {
  server::ServerWide& state = models.server();
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  const timespec poll = {0, 200'000'000};
  int sig = -1;
  while (!done && sig < 0) sig = sigtimedwait(&signals, nullptr, &poll);
  if (done) return;
  std::fprintf(stderr, "loom serve: %s received: finishing %lld request(s) in flight (at most %llds), refusing new ones\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(models.unfinished()),
               static_cast<long long>(timeout.count()));
  models.stop_admitting();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool forced = false;
  while (state.n_active_http > 0) {
    if (!forced && (std::chrono::steady_clock::now() >= deadline || sigtimedwait(&signals, nullptr, &poll) >= 0)) {
      std::fprintf(stderr, "loom serve: cancelling %lld request(s) still running\n",
                   static_cast<long long>(models.unfinished()));
      forced = true;
    }
    // Again on every pass: a request admitted after the first pass (it passed the stopping check
    // just before) is cancelled too.
    if (forced) models.cancel_all(server::CancelReason::shutdown);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (forced && std::chrono::steady_clock::now() > deadline + std::chrono::seconds(10)) break;  // a stuck client
  }
  http.stop();
}

// Every open connection is a file descriptor: raise the soft limit (often 1024) to the hard one so
// that [server] max_connections, not EMFILE, is what refuses a client.
void raise_open_file_limit(int64_t max_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  constexpr int64_t kOtherFiles = 256;  // the model, plugins, the listener, the engine's own
  if (limit.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(limit.rlim_cur) < max_connections + kOtherFiles) {
    std::fprintf(stderr,
                 "loom serve: warning: the open-file limit (%llu) is below [server] max_connections (%lld) + %lld; "
                 "connections past it wait in the listen queue (raise it with ulimit -n)\n",
                 static_cast<unsigned long long>(limit.rlim_cur), static_cast<long long>(max_connections),
                 static_cast<long long>(kOtherFiles));
  }
}

// An embedding model (a text encoder such as bert) is served by the embedding routes alone: no engine,
// no KV cache; each request's inputs run in batches of [scheduler] max_batched_tokens rows.
// A decoder serves embeddings when its file says how to pool it (Qwen3-Embedding) or [model] pooling does.
embed::Pooling embedding_pooling(const Config& config, const gguf::GgufFile& file) {
  if (config.model.pooling == "mean") return embed::Pooling::mean;
  if (config.model.pooling == "cls") return embed::Pooling::cls;
  if (config.model.pooling == "last") return embed::Pooling::last;
  return embed::decoder_pooling(file);
}

bool is_embedding_model(const Config& config, const gguf::GgufFile& file) {
  return embed::is_text_encoder(file) || embedding_pooling(config, file) != embed::Pooling::none;
}

// What [[models]] cannot combine with yet, refused by name before anything loads.
void check_several_models(const Config& config) {
  if (!config.model.path.empty())
    throw Error("[model] path and [[models]] are both set: with [[models]], every served model is an entry (move the path into one)");
  if (!config.loras.empty())
    throw Error("[[lora]] adapters belong to the one model of [model]; with [[models]] load them at run time "
                "(/v1/load_lora_adapter, on the first model)");
  if (config.server.kv_events.enabled)
    throw Error("[server.kv_events] publishes one model's prefix cache; it cannot be combined with [[models]] yet");
}

int serve_embeddings(const Config& config, const gguf::GgufFile& file, const std::filesystem::path& model_path, int64_t shutdown_seconds) {
  auto backend = Backend::create(find_backend_plugin(config, config.backend.name), backend_config_json(config));
  const auto tokenizer = Tokenizer::from_gguf(file);
  const auto load_start = std::chrono::steady_clock::now();
  std::unique_ptr<embed::Embedder> encoder;
  if (embed::is_text_encoder(file)) {
    encoder = embed::TextEncoder::load(file, *backend, config.scheduler.max_batched_tokens);
  } else {
    ModelOptions options;
    options.n_ctx = config.model.n_ctx;
    std::unique_ptr<Model> model = Model::load(file, *backend, options);
    const embed::Pooling pooling = embedding_pooling(config, file);
    embed::ClassifierHead head = pooling == embed::Pooling::rank ? embed::read_classifier_head(file, model->info().dim) : embed::ClassifierHead{};
    encoder = std::make_unique<embed::DecoderEmbedder>(std::move(model), model_path.string(), pooling, config.scheduler.max_batched_tokens, std::move(head));
  }
  const embed::TextEncoderInfo& m = encoder->info();
  const std::string served_name = config.server.model_name.empty() ? hf::model_name_of(model_path) : config.server.model_name;
  server::EmbeddingService service(*encoder, *tokenizer, served_name,
                                   {config.server.max_embedding_inputs, file.get_string("tokenizer.chat_template.rerank").value_or("")});
  server::EmbeddingServer http(service, config.server);
  const int bound = http.bind(config.server.host, static_cast<int>(config.server.port));
  std::fprintf(stderr, "loom serve: embedding model '%s' (%s, %lld dimensions, %s pooling, inputs up to %lld tokens) on %s, loaded in %.2f s%s\n",
               served_name.c_str(), m.arch.c_str(), static_cast<long long>(m.pooled_dim), embed::pooling_name(m.pooling),
               static_cast<long long>(std::min(m.n_ctx_train, encoder->max_tokens())), backend->name().c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count(),
               config.server.api_key.empty() ? "" : "; API key required");
  std::printf("loom serve: listening on http://%s:%d\n", config.server.host.c_str(), bound);
  std::fflush(stdout);
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    const timespec poll = {0, 200'000'000};
    while (!done && sigtimedwait(&signals, nullptr, &poll) < 0) {
    }
    if (!done) std::fprintf(stderr, "loom serve: stopping (requests in flight finish within %llds)\n", static_cast<long long>(shutdown_seconds));
    http.stop();
  });
  http.run();
  done = true;
  waiter.join();
  std::fprintf(stderr, "loom serve: stopped\n");
  return 0;
}

int run_serve(const CommandArgs& args) {
  HostOptions options;
  std::string model, host, api_key, model_name, backend;
  std::optional<int64_t> port, max_queue, threads, n_ctx;
  int64_t shutdown_seconds = 30;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (!nothing_after_end_of_options("serve", args, i)) return 2;
      break;
    }
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (options.parse(args, i)) {
    } else if (a == "--model" || a == "-m") {
      model = value();
    } else if (a == "--host") {
      host = value();
    } else if (a == "--port") {
      port = parse_int(a, value());
    } else if (a == "--api-key") {
      api_key = value();
    } else if (a == "--max-queue") {
      max_queue = parse_int(a, value());
    } else if (a == "--model-name") {
      model_name = value();
    } else if (a == "--backend") {
      backend = value();
    } else if (a == "--threads" || a == "-t") {
      threads = parse_int(a, value());
    } else if (a == "--n-ctx") {
      n_ctx = parse_int(a, value());
    } else if (a == "--shutdown-timeout") {
      shutdown_seconds = parse_int(a, value());
    } else {
      std::cerr << "loom serve: unknown argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  Config config = options.load_config();
  if (!model.empty()) config.model.path = model;
  if (!host.empty()) config.server.host = host;
  if (port) config.server.port = *port;
  if (!api_key.empty()) config.server.api_key = api_key;
  if (max_queue) config.server.max_queue = *max_queue;
  if (!model_name.empty()) config.server.model_name = model_name;
  if (!backend.empty()) config.backend.name = backend;
  if (threads) config.backend.threads = *threads;
  if (n_ctx) config.model.n_ctx = *n_ctx;
  if (config.server.port < 0 || config.server.port > 65535) throw std::runtime_error("--port must be 0..65535");
  if (config.server.max_queue < 1) throw std::runtime_error("--max-queue must be at least 1");
  if (shutdown_seconds < 0) throw std::runtime_error("--shutdown-timeout must be >= 0");

  // Block the shutdown signals before any thread exists, so every thread inherits the mask and only
  // the waiter sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished client must be a failed write, not a dead server
  raise_open_file_limit(config.server.max_connections);

  std::vector<server::ModelRegistry::Entry> entries;
  bool takes_images = false;
  if (config.models.empty()) {
    // One model ([model] path): loaded before the server listens, kept for its whole life.
    std::string model_note;
    const std::filesystem::path model_path =
        config.model.path.empty() ? default_chat_model_path(&model_note) : std::filesystem::path(config.model.path);
    if (!model_note.empty()) std::fprintf(stderr, "loom serve: warning: %s\n", model_note.c_str());
    if (const gguf::GgufFile file = hf::open_model_file(model_path); is_embedding_model(config, file))
      return serve_embeddings(config, file, model_path, shutdown_seconds);
    ModelEntrySettings only;
    only.name = config.server.model_name.empty() ? hf::model_name_of(model_path) : config.server.model_name;
    only.path = model_path.string();
    only.aliases = config.server.model_aliases;
    only.preload = true;
    entries.push_back({only, server::estimate_model_bytes(server::config_for_model(config, only))});
  } else {
    check_several_models(config);
    for (const ModelEntrySettings& entry : config.models)
      entries.push_back({entry, server::estimate_model_bytes(server::config_for_model(config, entry))});
    takes_images = true;  // any of them may take images: room for their bodies
  }
  const bool several = !config.models.empty();
  server::ServerWide wide(config.server);
  server::ModelRegistry models(wide, entries, [&config, &wide, several](const ModelEntrySettings& entry) {
    const Config model_config = server::config_for_model(config, entry);
    if (several) {
      if (const gguf::GgufFile file = hf::open_model_file(model_config.model.path); is_embedding_model(model_config, file))
        throw Error(entry.path + " is an embedding model: it is served alone (loom serve --model), not as one of [[models]]");
    }
    return server::load_served_model(wide, model_config, entry, !several);
  });
  models.preload();
  if (!several) {
    const server::ModelLease only_model = models.peek("");
    takes_images = only_model && only_model->engine.takes_images();
  }
  if (several) {
    std::string listed;
    for (const auto& entry : config.models) listed += (listed.empty() ? "" : ", ") + entry.name + (entry.preload ? " (preloaded)" : "");
    char idle[32] = "never";
    if (config.server.idle_unload > 0) std::snprintf(idle, sizeof idle, "after %g s", config.server.idle_unload);
    const std::string budget = config.server.memory_budget > 0 ? std::to_string(config.server.memory_budget >> 20) + " MiB" : "none";
    std::fprintf(stderr, "loom serve: %zu models: %s; memory budget %s, idle unload %s\n", config.models.size(), listed.c_str(),
                 budget.c_str(), idle);
  }
  server::HttpServer http(models, takes_images);
  const int bound = http.bind(config.server.host, static_cast<int>(config.server.port));
  // stdout, one line, flushed: scripts (and the tests) read the bound port from it.
  std::printf("loom serve: listening on http://%s:%d\n", config.server.host.c_str(), bound);
  std::fflush(stdout);

  std::atomic<bool> done{false};
  std::thread waiter([&] { shutdown_on_signal(models, http, done, std::chrono::seconds(shutdown_seconds)); });
  http.run();
  done = true;
  waiter.join();
  models.unload_all();
  std::fprintf(stderr, "loom serve: stopped\n");
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("serve", "OpenAI-compatible HTTP server (completions, chat, streaming, /metrics)", run_serve);

}  // namespace loom::host
