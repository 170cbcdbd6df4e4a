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
#include "server/server_state.h"
#include "progress_bar.h"

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
    "  --config FILE             loom.toml to read\n";

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
void shutdown_on_signal(server::ServerState& state, server::HttpServer& http, std::atomic<bool>& done,
                        std::chrono::seconds timeout) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  const timespec poll = {0, 200'000'000};
  int sig = -1;
  while (!done && sig < 0) sig = sigtimedwait(&signals, nullptr, &poll);
  if (done) return;
  std::fprintf(stderr, "loom serve: %s received: finishing %lld request(s) in flight (at most %llds), refusing new ones\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(state.n_unfinished.load()),
               static_cast<long long>(timeout.count()));
  state.stopping = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool forced = false;
  while (state.n_active_http > 0) {
    if (!forced && (std::chrono::steady_clock::now() >= deadline || sigtimedwait(&signals, nullptr, &poll) >= 0)) {
      std::fprintf(stderr, "loom serve: cancelling %lld request(s) still running\n",
                   static_cast<long long>(state.n_unfinished.load()));
      state.cancel_all(server::CancelReason::shutdown);
      forced = true;
    }
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

  std::string model_note;
  const std::filesystem::path model_path =
      config.model.path.empty() ? default_chat_model_path(&model_note) : std::filesystem::path(config.model.path);
  if (!model_note.empty()) std::fprintf(stderr, "loom serve: warning: %s\n", model_note.c_str());
  std::fprintf(stderr, "loom serve: loading %s on backend '%s'...\n", model_path.string().c_str(), config.backend.name.c_str());
  if (const gguf::GgufFile file = hf::open_model_file(model_path); embed::is_text_encoder(file) || embedding_pooling(config, file) != embed::Pooling::none)
    return serve_embeddings(config, file, model_path, shutdown_seconds);
  const auto load_start = std::chrono::steady_clock::now();
  ProgressBar load_bar("loading model", "MiB", 1 << 20);
  Engine engine(config, model_path, [&load_bar](uint64_t done, uint64_t total) { load_bar.update(done, total); });
  load_bar.finish();
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const EngineInfo& info = engine.info();
  std::fprintf(stderr, "loom serve: loaded in %.2f s\n", load_seconds);

  server::ChatTemplateOrigin template_origin;
  chat::ChatTemplate chat_template = [&] {
    if (config.model.chat_template.empty()) return chat::ChatTemplate::for_model(engine.gguf(), &template_origin.note);
    template_origin.kind = server::ChatTemplateOrigin::Kind::configured;
    try {
      return chat::ChatTemplate::builtin(config.model.chat_template);
    } catch (const Error&) {
      return chat::ChatTemplate::parse(config.model.chat_template);
    }
  }();
  if (!template_origin.note.empty()) {
    template_origin.kind = server::ChatTemplateOrigin::Kind::builtin_fallback;
    std::fprintf(stderr, "loom serve: chat template: %s; the model may not be instruction-tuned (chats may fail, "
                 "completions work)\n", template_origin.note.c_str());
  }

  const std::string served_name = config.server.model_name.empty() ? hf::model_name_of(model_path) : config.server.model_name;
  server::ServerState state(engine, config.server, served_name, std::move(chat_template), config.sampler.seed,
                            std::move(template_origin));
  server::HttpServer http(state);
  const int bound = http.bind(config.server.host, static_cast<int>(config.server.port));
  std::unique_ptr<server::KvEventPublisher> kv_events;
  if (config.server.kv_events.enabled) {
    kv_events = std::make_unique<server::KvEventPublisher>(config.server.kv_events, info.kv_block_size);
    server::KvEventPublisher* publisher = kv_events.get();
    if (engine.set_kv_event_listener([publisher](const KvEvent& event) { publisher->publish(event); })) {
      std::fprintf(stderr, "loom serve: KV events on %s%s%s\n", publisher->endpoint().c_str(),
                   config.server.kv_events.replay_endpoint.empty() ? "" : ", replay on ",
                   config.server.kv_events.replay_endpoint.c_str());
    } else {
      std::fprintf(stderr, "loom serve: KV allocator '%s' publishes no events (built before ABI 1.4); routers fall back "
                   "to approximate routing\n", config.kv.allocator.c_str());
    }
  }
  engine.start();

  const uint64_t full_context_seqs = info.n_ctx > 0 ? info.kv_layout.sequences_of(static_cast<uint64_t>(info.n_ctx)) : 0;
  const std::string rings = info.kv_window_rings > 0 ? " (sliding layers in " + std::to_string(info.kv_window_rings) + " window rings of " +
                                                           std::to_string(info.kv_window_ring_tokens) + " tokens)"
                                                     : "";
  const std::string lowered = info.n_ctx < info.n_ctx_requested
                                  ? ", lowered from " + std::to_string(info.n_ctx_requested) + " to fit the KV cache"
                                  : "";
  std::fprintf(stderr,
               "loom serve: model '%s' (%s, context %lld%s) on %s (%s); KV cache %llu tokens in %u blocks of %u = %llu "
               "full-context sequences%s (max_num_seqs %u), %.1f MiB; max_queue %lld%s\n",
               served_name.c_str(), info.model_name.c_str(), static_cast<long long>(info.n_ctx), lowered.c_str(),
               info.backend_name.c_str(),
               info.device_name.c_str(), static_cast<unsigned long long>(info.kv_capacity_tokens), info.kv_blocks,
               info.kv_block_size, static_cast<unsigned long long>(full_context_seqs), rings.c_str(), info.max_num_seqs,
               static_cast<double>(info.kv_bytes) / (1024.0 * 1024.0), static_cast<long long>(config.server.max_queue),
               config.server.api_key.empty() ? "" : "; API key required");
  if (const EngineStats stats = engine.stats(); stats.disk_tier) {
    std::fprintf(stderr, "loom serve: prefix cache disk tier %s: %llu blocks, %.1f of %.1f MiB\n",
                 config.kv.disk_cache_path.c_str(), static_cast<unsigned long long>(stats.disk.files),
                 static_cast<double>(stats.disk.bytes) / (1024.0 * 1024.0),
                 static_cast<double>(stats.disk.capacity_bytes) / (1024.0 * 1024.0));
  }
  // stdout, one line, flushed: scripts (and the tests) read the bound port from it.
  std::printf("loom serve: listening on http://%s:%d\n", config.server.host.c_str(), bound);
  std::fflush(stdout);

  std::atomic<bool> done{false};
  std::thread waiter([&] { shutdown_on_signal(state, http, done, std::chrono::seconds(shutdown_seconds)); });
  http.run();
  done = true;
  waiter.join();
  engine.stop(true);
  if (kv_events) {
    engine.set_kv_event_listener(nullptr);  // the engine outlives the publisher
    kv_events.reset();
  }
  std::fprintf(stderr, "loom serve: stopped\n");
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("serve", "OpenAI-compatible HTTP server (completions, chat, streaming, /metrics)", run_serve);

}  // namespace loom::host
