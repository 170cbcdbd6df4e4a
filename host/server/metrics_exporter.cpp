#include "server/metrics_exporter.h"

#include <cstdio>
#include <sstream>

namespace loom::server {

namespace {

// Prometheus wants Go-style floats: "+Inf", and integers without an exponent.
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Writer {
 public:
  void header(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, double value, const std::string& labels = "") {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << number(value) << '\n';
  }
  void metric(const std::string& name, const char* type, const char* help, double value) {
    header(name, type, help);
    sample(name, value);
  }
  // One histogram's samples (its header written once before all models' samples).
  void histogram_samples(const std::string& name, const Histogram& h, const std::string& labels) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      sample(name + "_bucket", static_cast<double>(cumulative), labels + ",le=\"" + number(h.bounds()[i]) + "\"");
    }
    sample(name + "_bucket", static_cast<double>(h.count()), labels + ",le=\"+Inf\"");
    sample(name + "_sum", h.sum(), labels);
    sample(name + "_count", static_cast<double>(h.count()), labels);
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// A label value as Prometheus' text format wants it escaped.
std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// A model in memory, with its figures read once for the whole page.
struct Served {
  const ServerState* state;
  EngineStats stats;
  std::string model_label;  // model="NAME"
};

// Per-model metrics: one header, then a sample per model in memory, labelled with its name.
class PerModel {
 public:
  PerModel(Writer& w, const std::vector<Served>& served) : w_(w), served_(served) {}

  template <class Value>
  void metric(const std::string& name, const char* type, const char* help, Value value) {
    w_.header(name, type, help);
    for (const Served& m : served_) w_.sample(name, static_cast<double>(value(m)), m.model_label);
  }
  template <class Value>
  void gauge(const std::string& name, const char* help, Value value) { metric(name, "gauge", help, value); }
  template <class Value>
  void counter(const std::string& name, const char* help, Value value) { metric(name, "counter", help, value); }
  template <class Pick>
  void histogram(const std::string& name, const char* help, Pick pick) {
    w_.header(name, "histogram", help);
    for (const Served& m : served_) w_.histogram_samples(name, pick(m.stats), m.model_label);
  }

 private:
  Writer& w_;
  const std::vector<Served>& served_;
};

// The same figures under vLLM's names, which routers and Kubernetes inference gateways read
// (vllm-router's load figures, the Gateway API inference extension's endpoint picker): queue
// depth, running batch and KV-cache utilisation, labelled with the served model as vLLM does.
void render_vllm_compatible(Writer& w, const std::vector<Served>& served) {
  auto gauge = [&](const char* name, const char* help, auto value, const char* type = "gauge") {
    w.header(name, type, help);
    for (const Served& m : served)
      w.sample(name, static_cast<double>(value(m.stats)), "model_name=\"" + label_value(m.state->model_name) + "\"");
  };
  const auto usage = [](const EngineStats& s) {
    return s.kv_blocks_total ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0;
  };
  gauge("vllm:num_requests_running", "Requests in the running batch (loom_num_requests_running).",
        [](const EngineStats& s) { return s.running; });
  gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled (loom_num_requests_waiting).",
        [](const EngineStats& s) { return s.waiting; });
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 1 = full (loom_kv_cache_usage_ratio).", usage);
  gauge("vllm:gpu_cache_usage_perc", "Older name of vllm:kv_cache_usage_perc, still read by some gateways.", usage);
  // vLLM counts tokens: every prompt token is queried, the cached ones hit.
  gauge("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (loom_prompt_tokens_total).",
        [](const EngineStats& s) { return s.prompt_tokens; }, "counter");
  gauge("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache (loom_cached_prompt_tokens_total).",
        [](const EngineStats& s) { return s.cached_prompt_tokens; }, "counter");
}

// The server's own figures: HTTP exchanges and connections, whatever model they were for.
void render_http(Writer& w, const ServerWide& server) {
  w.header("loom_http_requests_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [key, count] : server.http_counters.snapshot()) {
    w.sample("loom_http_requests_total", static_cast<double>(count),
             "route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"");
  }
  w.metric("loom_http_requests_in_flight", "gauge", "HTTP exchanges being served (streams until their last byte).",
           static_cast<double>(server.n_active_http.load()));
  if (!server.connection_counts) return;
  const ConnectionCounts c = server.connection_counts();
  w.metric("loom_http_connections_open", "gauge", "Client connections open (idle, waiting or being served).",
           static_cast<double>(c.open));
  w.metric("loom_http_connections_idle", "gauge", "Open connections waiting for their next request (no thread held).",
           static_cast<double>(c.idle));
  w.metric("loom_http_connections_accepted_total", "counter", "Client connections accepted.", static_cast<double>(c.accepted));
  w.metric("loom_http_connections_refused_total", "counter",
           "Connections answered 503 because [server] max_connections were open.", static_cast<double>(c.refused));
  w.header("loom_http_connections_timed_out_total", "counter",
           "Connections closed by a limit: idle (keep_alive_timeout, or no request within request_read_timeout) "
           "or read (a request that did not arrive in full within request_read_timeout).");
  w.sample("loom_http_connections_timed_out_total", static_cast<double>(c.idle_timeouts), "reason=\"idle\"");
  w.sample("loom_http_connections_timed_out_total", static_cast<double>(c.read_timeouts), "reason=\"read\"");
}

// Which models are in memory, and how often they came and went ([[models]], [server] memory_budget).
void render_models(Writer& w, const std::vector<ModelView>& views, const ServerSettings& settings) {
  const auto each = [&](const std::string& name, const char* type, const char* help, auto value) {
    w.header(name, type, help);
    for (const ModelView& v : views) w.sample(name, static_cast<double>(value(v)), "model=\"" + label_value(v.name) + "\"");
  };
  each("loom_model_loaded", "gauge", "1 while the model is in memory and serving, else 0.",
       [](const ModelView& v) { return v.status == ModelStatus::loaded ? 1 : 0; });
  each("loom_model_memory_bytes", "gauge", "Weights and KV pool the model holds (or would hold once loaded: an estimate).",
       [](const ModelView& v) { return v.bytes; });
  each("loom_model_active_requests", "gauge", "HTTP requests holding the model in memory now.",
       [](const ModelView& v) { return v.requests; });
  each("loom_model_loads_total", "counter", "Times the model was loaded.", [](const ModelView& v) { return v.loads; });
  each("loom_model_load_failures_total", "counter", "Loads of the model that failed.", [](const ModelView& v) { return v.load_failures; });
  w.header("loom_model_unloads_total", "counter",
           "Times the model was unloaded: budget (room for another model) or idle ([server] idle_unload).");
  for (const ModelView& v : views) {
    const std::string model = "model=\"" + label_value(v.name) + "\"";
    w.sample("loom_model_unloads_total", static_cast<double>(v.unloads_budget), model + ",reason=\"budget\"");
    w.sample("loom_model_unloads_total", static_cast<double>(v.unloads_idle), model + ",reason=\"idle\"");
  }
  w.metric("loom_server_memory_budget_bytes", "gauge", "[server] memory_budget (0 = no limit).",
           static_cast<double>(settings.memory_budget));
}

}  // namespace

std::string render_metrics(ModelRegistry& models) {
  const std::vector<ModelView> views = models.models();
  std::vector<Served> served;
  for (const ModelView& view : views) {
    if (view.state) served.push_back({view.state.get(), view.state->engine.stats(), "model=\"" + label_value(view.name) + "\""});
  }
  Writer w;
  PerModel m(w, served);
  w.header("loom_requests_total", "counter", "Engine requests by outcome (rejected = refused at submit).");
  for (const Served& s : served) {
    for (const auto& [outcome, count] : {std::pair{"finished", s.stats.requests_finished}, std::pair{"cancelled", s.stats.requests_cancelled},
                                         std::pair{"failed", s.stats.requests_failed}, std::pair{"rejected", s.stats.requests_rejected}}) {
      w.sample("loom_requests_total", static_cast<double>(count), s.model_label + ",outcome=\"" + outcome + "\"");
    }
  }
  m.counter("loom_requests_submitted_total", "Engine requests accepted by submit().",
            [](const Served& s) { return s.stats.requests_submitted; });
  // Every reason is listed from the start, so a dashboard's rate() sees the first cancellation.
  w.header("loom_requests_cancelled_total", "counter",
           "Requests the server cancelled, by reason (client_disconnected, shutdown, choice_failed).");
  for (const Served& s : served) {
    auto cancelled = s.state->cancelled_by_reason();
    for (auto reason : {CancelReason::client_disconnected, CancelReason::shutdown, CancelReason::choice_failed}) {
      cancelled.emplace(cancel_reason_name(reason), 0);
    }
    for (const auto& [reason, count] : cancelled) {
      w.sample("loom_requests_cancelled_total", static_cast<double>(count), s.model_label + ",reason=\"" + reason + "\"");
    }
  }

  render_http(w, models.server());
  render_models(w, views, models.server().settings);
  m.gauge("loom_server_queue_depth", "Engine requests admitted by the server and not finished.",
          [](const Served& s) { return s.state->n_unfinished.load(); });
  w.metric("loom_server_max_queue", "gauge", "Admission limit ([server] max_queue, per model); beyond it requests get 429.",
           static_cast<double>(models.server().settings.max_queue));

  m.gauge("loom_num_requests_running", "Sequences in the running batch.", [](const Served& s) { return s.stats.running; });
  m.gauge("loom_num_requests_waiting", "Sequences waiting to be scheduled.", [](const Served& s) { return s.stats.waiting; });

  m.gauge("loom_kv_blocks_used", "KV cache blocks held by sequences.", [](const Served& s) { return s.stats.kv_blocks_used; });
  m.gauge("loom_kv_blocks_total", "KV cache blocks in the pool.", [](const Served& s) { return s.stats.kv_blocks_total; });
  m.gauge("loom_kv_blocks_free", "KV cache blocks free (cached prefixes included).", [](const Served& s) { return s.stats.kv_blocks_free; });
  m.gauge("loom_kv_block_size_tokens", "Tokens per KV block.", [](const Served& s) { return s.stats.kv_block_size; });
  m.gauge("loom_kv_cache_usage_ratio", "kv_blocks_used / kv_blocks_total.", [](const Served& s) {
    return s.stats.kv_blocks_total ? static_cast<double>(s.stats.kv_blocks_used) / s.stats.kv_blocks_total : 0.0;
  });

  m.counter("loom_prefix_cache_queries_total", "Full prompt blocks looked up in the prefix cache.",
            [](const Served& s) { return s.stats.prefix_queries; });
  m.counter("loom_prefix_cache_hits_total", "Prefix cache lookups that found the block.", [](const Served& s) { return s.stats.prefix_hits; });
  m.gauge("loom_prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total.", [](const Served& s) {
    return s.stats.prefix_queries ? static_cast<double>(s.stats.prefix_hits) / static_cast<double>(s.stats.prefix_queries) : 0.0;
  });

  std::vector<Served> with_disk;
  for (const Served& s : served) {
    if (s.stats.disk_tier) with_disk.push_back(s);
  }
  if (!with_disk.empty()) {
    PerModel d(w, with_disk);
    d.gauge("loom_kv_disk_blocks", "Prefix-cache blocks in the disk tier ([kv] disk_cache_path).", [](const Served& s) { return s.stats.disk.files; });
    d.gauge("loom_kv_disk_bytes", "Bytes of the disk tier's block files.", [](const Served& s) { return s.stats.disk.bytes; });
    d.gauge("loom_kv_disk_capacity_bytes", "The disk tier's limit ([kv] disk_cache_bytes).", [](const Served& s) { return s.stats.disk.capacity_bytes; });
    d.counter("loom_kv_disk_hit_tokens_total", "Prompt tokens loaded from the disk tier instead of computed.",
              [](const Served& s) { return s.stats.disk_cached_tokens; });
    d.counter("loom_kv_disk_blocks_read_total", "Blocks loaded from the disk tier.", [](const Served& s) { return s.stats.disk.blocks_read; });
    d.counter("loom_kv_disk_read_bytes_total", "Bytes loaded from the disk tier.", [](const Served& s) { return s.stats.disk.bytes_read; });
    d.counter("loom_kv_disk_read_seconds_total", "Time spent reading and checking disk-tier blocks.", [](const Served& s) { return s.stats.disk.read_seconds; });
    d.counter("loom_kv_disk_blocks_written_total", "Blocks written to the disk tier.", [](const Served& s) { return s.stats.disk.blocks_written; });
    d.counter("loom_kv_disk_written_bytes_total", "Bytes written to the disk tier.", [](const Served& s) { return s.stats.disk.bytes_written; });
    d.counter("loom_kv_disk_writes_dropped_total", "Blocks not written: the write queue was full or the disk refused.",
              [](const Served& s) { return s.stats.disk.writes_dropped; });
    d.counter("loom_kv_disk_evictions_total", "Block files deleted to stay within the capacity.", [](const Served& s) { return s.stats.disk.evictions; });
    d.counter("loom_kv_disk_files_rejected_total", "Corrupt, truncated or foreign (other model or KV type) block files skipped, never loaded.",
              [](const Served& s) { return s.stats.disk.files_rejected; });
  }

  m.counter("loom_images_encoded_total", "Images run through the vision encoder ([model] mmproj).", [](const Served& s) { return s.stats.images_encoded; });
  m.counter("loom_image_cache_hits_total", "Images whose rows came from the encoder's cache (the same image again).",
            [](const Served& s) { return s.stats.image_cache_hits; });
  m.counter("loom_image_encoder_seconds_total", "Time the vision encoder took.", [](const Served& s) { return s.stats.encoder_seconds; });
  m.counter("loom_prompt_tokens_total", "Prompt tokens of submitted requests.", [](const Served& s) { return s.stats.prompt_tokens; });
  m.counter("loom_cached_prompt_tokens_total", "Prompt tokens served from the prefix cache.", [](const Served& s) { return s.stats.cached_prompt_tokens; });
  m.counter("loom_generation_tokens_total", "Tokens generated.", [](const Served& s) { return s.stats.generated_tokens; });
  m.counter("loom_engine_steps_total", "Forward passes (scheduler steps).", [](const Served& s) { return s.stats.steps; });
  m.counter("loom_preemptions_total", "Sequences preempted (recomputed later) for lack of KV blocks.", [](const Served& s) { return s.stats.preemptions; });
  m.counter("loom_draft_tokens_proposed_total", "Speculative tokens proposed.", [](const Served& s) { return s.stats.draft_tokens_proposed; });
  m.counter("loom_draft_tokens_accepted_total", "Speculative tokens accepted.", [](const Served& s) { return s.stats.draft_tokens_accepted; });

  m.histogram("loom_time_to_first_token_seconds", "Time from arrival to the first generated token.", [](const EngineStats& s) -> const Histogram& { return s.ttft; });
  m.histogram("loom_time_per_output_token_seconds", "Time between generated tokens.", [](const EngineStats& s) -> const Histogram& { return s.tpot; });
  m.histogram("loom_request_queue_time_seconds", "Time from arrival to first scheduling.", [](const EngineStats& s) -> const Histogram& { return s.queue_time; });
  render_vllm_compatible(w, served);
  return w.str();
}

}  // namespace loom::server
