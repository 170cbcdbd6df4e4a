#include "server/model_loader.h"

#include <chrono>
#include <cstdio>
#include <system_error>

#include "common/error.h"
#include "engine/engine.h"
#include "hf/hf_checkpoint.h"
#include "progress_bar.h"
#include "server/kv_event_publisher.h"

namespace loom::server {

namespace {

// Bytes of the weights as stored: a GGUF file, or the safetensors of a Hugging Face folder.
uint64_t weight_file_bytes(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) return std::filesystem::file_size(path, error);
  uint64_t total = 0;
  if (!std::filesystem::is_directory(path, error)) return 0;
  for (const auto& file : std::filesystem::directory_iterator(path, error)) {
    if (file.path().extension() == ".safetensors") total += file.file_size(error);
  }
  return total;
}

chat::ChatTemplate chat_template_for(const Config& config, const Engine& engine, ChatTemplateOrigin& origin) {
  if (config.model.chat_template.empty()) return chat::ChatTemplate::for_model(engine.gguf(), &origin.note);
  origin.kind = ChatTemplateOrigin::Kind::configured;
  try {
    return chat::ChatTemplate::builtin(config.model.chat_template);
  } catch (const Error&) {
    return chat::ChatTemplate::parse(config.model.chat_template);
  }
}

// Prefix-cache events for KV-aware routers ([server.kv_events]); detached when the model unloads.
void publish_kv_events(const Config& config, LoadedModel& model) {
  if (!config.server.kv_events.enabled) return;
  auto publisher = std::make_shared<KvEventPublisher>(config.server.kv_events, model.engine->info().kv_block_size);
  Engine* engine = model.engine.get();
  if (!engine->set_kv_event_listener([publisher](const KvEvent& event) { publisher->publish(event); })) {
    std::fprintf(stderr, "loom serve: KV allocator '%s' publishes no events (built before ABI 1.4); routers fall back "
                 "to approximate routing\n", config.kv.allocator.c_str());
    return;
  }
  std::fprintf(stderr, "loom serve: KV events on %s%s%s\n", publisher->endpoint().c_str(),
               config.server.kv_events.replay_endpoint.empty() ? "" : ", replay on ", config.server.kv_events.replay_endpoint.c_str());
  model.on_unload = [engine, publisher]() mutable {
    engine->set_kv_event_listener(nullptr);  // the engine has stopped; the publisher goes first
    publisher.reset();
  };
}

void print_served_model(const std::string& name, const EngineInfo& info, const Config& config) {
  const uint64_t full_context_seqs = info.n_ctx > 0 ? info.kv_layout.sequences_of(static_cast<uint64_t>(info.n_ctx)) : 0;
  const std::string rings = info.kv_window_rings > 0 ? " (sliding layers in " + std::to_string(info.kv_window_rings) + " window rings of " +
                                                           std::to_string(info.kv_window_ring_tokens) + " tokens)"
                                                     : "";
  const std::string lowered =
      info.n_ctx < info.n_ctx_requested ? ", lowered from " + std::to_string(info.n_ctx_requested) + " to fit the KV cache" : "";
  std::fprintf(stderr,
               "loom serve: model '%s' (%s, context %lld%s) on %s (%s); KV cache %llu tokens in %u blocks of %u = %llu "
               "full-context sequences%s (max_num_seqs %u), %.1f MiB; max_queue %lld%s\n",
               name.c_str(), info.model_name.c_str(), static_cast<long long>(info.n_ctx), lowered.c_str(), info.backend_name.c_str(),
               info.device_name.c_str(), static_cast<unsigned long long>(info.kv_capacity_tokens), info.kv_blocks, info.kv_block_size,
               static_cast<unsigned long long>(full_context_seqs), rings.c_str(), info.max_num_seqs,
               static_cast<double>(info.kv_bytes) / (1024.0 * 1024.0), static_cast<long long>(config.server.max_queue),
               config.server.api_key.empty() ? "" : "; API key required");
}

}  // namespace

Config config_for_model(const Config& shared, const ModelEntrySettings& entry) {
  Config config = shared;
  config.model.path = entry.path;
  if (entry.n_ctx >= 0) config.model.n_ctx = entry.n_ctx;
  if (entry.kv_memory_bytes > 0) {
    config.kv.memory_bytes = entry.kv_memory_bytes;
    config.kv.memory_fraction = 0.0;
  }
  if (!entry.backend.empty()) config.backend.name = entry.backend;
  if (entry.threads >= 0) config.backend.threads = entry.threads;
  if (!entry.chat_template.empty()) config.model.chat_template = entry.chat_template;
  config.server.model_name = entry.name;
  config.server.model_aliases = entry.aliases;
  return config;
}

uint64_t estimate_model_bytes(const Config& config) {
  return weight_file_bytes(config.model.path) + static_cast<uint64_t>(config.kv.memory_bytes);
}

std::unique_ptr<LoadedModel> load_served_model(ServerWide& server, const Config& config, const ModelEntrySettings& entry,
                                               bool show_progress) {
  const std::filesystem::path path = config.model.path;
  std::fprintf(stderr, "loom serve: loading '%s' (%s) on backend '%s'...\n", entry.name.c_str(), path.string().c_str(),
               config.backend.name.c_str());
  const auto start = std::chrono::steady_clock::now();
  auto model = std::make_unique<LoadedModel>();
  if (show_progress) {
    host::ProgressBar bar("loading model", "MiB", 1 << 20);
    model->engine = std::make_unique<Engine>(config, path, [&bar](uint64_t done, uint64_t total) { bar.update(done, total); });
    bar.finish();
  } else {
    model->engine = std::make_unique<Engine>(config, path);
  }
  const EngineInfo& info = model->engine->info();
  std::fprintf(stderr, "loom serve: loaded in %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  ChatTemplateOrigin origin;
  chat::ChatTemplate chat_template = chat_template_for(config, *model->engine, origin);
  if (!origin.note.empty()) {
    origin.kind = ChatTemplateOrigin::Kind::builtin_fallback;
    std::fprintf(stderr, "loom serve: chat template: %s; the model may not be instruction-tuned (chats may fail, "
                 "completions work)\n", origin.note.c_str());
  }
  model->state = std::make_unique<ServerState>(server, *model->engine, config.server, entry.name, std::move(chat_template),
                                               config.sampler.seed, std::move(origin));
  model->resident_bytes = info.weight_bytes + info.kv_bytes;
  publish_kv_events(config, *model);
  model->engine->start();
  print_served_model(entry.name, info, config);
  if (const EngineStats stats = model->engine->stats(); stats.disk_tier) {
    std::fprintf(stderr, "loom serve: prefix cache disk tier %s: %llu blocks, %.1f of %.1f MiB\n", config.kv.disk_cache_path.c_str(),
                 static_cast<unsigned long long>(stats.disk.files), static_cast<double>(stats.disk.bytes) / (1024.0 * 1024.0),
                 static_cast<double>(stats.disk.capacity_bytes) / (1024.0 * 1024.0));
  }
  return model;
}

}  // namespace loom::server
