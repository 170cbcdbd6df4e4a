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
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    header(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      sample(name + "_bucket", static_cast<double>(cumulative), "le=\"" + number(h.bounds()[i]) + "\"");
    }
    sample(name + "_bucket", static_cast<double>(h.count()), "le=\"+Inf\"");
    sample(name + "_sum", h.sum());
    sample(name + "_count", static_cast<double>(h.count()));
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// The same figures under vLLM's names, which routers and Kubernetes inference gateways read
// (vllm-router's load figures, the Gateway API inference extension's endpoint picker): queue
// depth, running batch and KV-cache utilisation, labelled with the served model as vLLM does.
void render_vllm_compatible(Writer& w, const EngineStats& s, const ServerState& state) {
  std::string model = state.model_name;
  for (char& c : model) {
    if (c == '"' || c == '\\' || c == '\n') c = '_';
  }
  const std::string label = "model_name=\"" + model + "\"";
  const double usage = s.kv_blocks_total ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0;
  auto gauge = [&](const char* name, const char* help, double value, const char* type = "gauge") {
    w.header(name, type, help);
    w.sample(name, value, label);
  };
  gauge("vllm:num_requests_running", "Requests in the running batch (loom_num_requests_running).",
        static_cast<double>(s.running));
  gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled (loom_num_requests_waiting).",
        static_cast<double>(s.waiting));
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 1 = full (loom_kv_cache_usage_ratio).", usage);
  gauge("vllm:gpu_cache_usage_perc", "Older name of vllm:kv_cache_usage_perc, still read by some gateways.", usage);
  // vLLM counts tokens: every prompt token is queried, the cached ones hit.
  gauge("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (loom_prompt_tokens_total).",
        static_cast<double>(s.prompt_tokens), "counter");
  gauge("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache (loom_cached_prompt_tokens_total).",
        static_cast<double>(s.cached_prompt_tokens), "counter");
}

}  // namespace

std::string render_metrics(const EngineStats& s, const ServerState& state) {
  Writer w;
  w.header("loom_requests_total", "counter", "Engine requests by outcome (rejected = refused at submit).");
  w.sample("loom_requests_total", static_cast<double>(s.requests_finished), "outcome=\"finished\"");
  w.sample("loom_requests_total", static_cast<double>(s.requests_cancelled), "outcome=\"cancelled\"");
  w.sample("loom_requests_total", static_cast<double>(s.requests_failed), "outcome=\"failed\"");
  w.sample("loom_requests_total", static_cast<double>(s.requests_rejected), "outcome=\"rejected\"");
  w.metric("loom_requests_submitted_total", "counter", "Engine requests accepted by submit().",
           static_cast<double>(s.requests_submitted));
  // Every reason is listed from the start, so a dashboard's rate() sees the first cancellation.
  auto cancelled = state.cancelled_by_reason();
  for (auto reason : {CancelReason::client_disconnected, CancelReason::shutdown, CancelReason::choice_failed}) {
    cancelled.emplace(cancel_reason_name(reason), 0);
  }
  w.header("loom_requests_cancelled_total", "counter",
           "Requests the server cancelled, by reason (client_disconnected, shutdown, choice_failed).");
  for (const auto& [reason, count] : cancelled) {
    w.sample("loom_requests_cancelled_total", static_cast<double>(count), "reason=\"" + reason + "\"");
  }

  w.header("loom_http_requests_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [key, count] : state.http_counters.snapshot()) {
    w.sample("loom_http_requests_total", static_cast<double>(count),
             "route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"");
  }
  w.metric("loom_http_requests_in_flight", "gauge", "HTTP exchanges being served (streams until their last byte).",
           static_cast<double>(state.n_active_http.load()));
  if (state.connection_counts) {
    const ConnectionCounts c = state.connection_counts();
    w.metric("loom_http_connections_open", "gauge", "Client connections open (idle, waiting or being served).",
             static_cast<double>(c.open));
    w.metric("loom_http_connections_idle", "gauge", "Open connections waiting for their next request (no thread held).",
             static_cast<double>(c.idle));
    w.metric("loom_http_connections_accepted_total", "counter", "Client connections accepted.",
             static_cast<double>(c.accepted));
    w.metric("loom_http_connections_refused_total", "counter",
             "Connections answered 503 because [server] max_connections were open.", static_cast<double>(c.refused));
    w.header("loom_http_connections_timed_out_total", "counter",
             "Connections closed by a limit: idle (keep_alive_timeout, or no request within request_read_timeout) "
             "or read (a request that did not arrive in full within request_read_timeout).");
    w.sample("loom_http_connections_timed_out_total", static_cast<double>(c.idle_timeouts), "reason=\"idle\"");
    w.sample("loom_http_connections_timed_out_total", static_cast<double>(c.read_timeouts), "reason=\"read\"");
  }
  w.metric("loom_server_queue_depth", "gauge", "Engine requests admitted by the server and not finished.",
           static_cast<double>(state.n_unfinished.load()));
  w.metric("loom_server_max_queue", "gauge", "Admission limit ([server] max_queue); beyond it requests get 429.",
           static_cast<double>(state.settings.max_queue));

  w.metric("loom_num_requests_running", "gauge", "Sequences in the running batch.", static_cast<double>(s.running));
  w.metric("loom_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.", static_cast<double>(s.waiting));

  w.metric("loom_kv_blocks_used", "gauge", "KV cache blocks held by sequences.", s.kv_blocks_used);
  w.metric("loom_kv_blocks_total", "gauge", "KV cache blocks in the pool.", s.kv_blocks_total);
  w.metric("loom_kv_blocks_free", "gauge", "KV cache blocks free (cached prefixes included).", s.kv_blocks_free);
  w.metric("loom_kv_block_size_tokens", "gauge", "Tokens per KV block.", s.kv_block_size);
  w.metric("loom_kv_cache_usage_ratio", "gauge", "kv_blocks_used / kv_blocks_total.",
           s.kv_blocks_total ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0);

  w.metric("loom_prefix_cache_queries_total", "counter", "Full prompt blocks looked up in the prefix cache.",
           static_cast<double>(s.prefix_queries));
  w.metric("loom_prefix_cache_hits_total", "counter", "Prefix cache lookups that found the block.",
           static_cast<double>(s.prefix_hits));
  w.metric("loom_prefix_cache_hit_rate", "gauge", "prefix_cache_hits_total / prefix_cache_queries_total.",
           s.prefix_queries ? static_cast<double>(s.prefix_hits) / static_cast<double>(s.prefix_queries) : 0.0);

  if (s.disk_tier) {
    const DiskTierStats& d = s.disk;
    w.metric("loom_kv_disk_blocks", "gauge", "Prefix-cache blocks in the disk tier ([kv] disk_cache_path).", static_cast<double>(d.files));
    w.metric("loom_kv_disk_bytes", "gauge", "Bytes of the disk tier's block files.", static_cast<double>(d.bytes));
    w.metric("loom_kv_disk_capacity_bytes", "gauge", "The disk tier's limit ([kv] disk_cache_bytes).",
             static_cast<double>(d.capacity_bytes));
    w.metric("loom_kv_disk_hit_tokens_total", "counter", "Prompt tokens loaded from the disk tier instead of computed.",
             static_cast<double>(s.disk_cached_tokens));
    w.metric("loom_kv_disk_blocks_read_total", "counter", "Blocks loaded from the disk tier.", static_cast<double>(d.blocks_read));
    w.metric("loom_kv_disk_read_bytes_total", "counter", "Bytes loaded from the disk tier.", static_cast<double>(d.bytes_read));
    w.metric("loom_kv_disk_read_seconds_total", "counter", "Time spent reading and checking disk-tier blocks.", d.read_seconds);
    w.metric("loom_kv_disk_blocks_written_total", "counter", "Blocks written to the disk tier.", static_cast<double>(d.blocks_written));
    w.metric("loom_kv_disk_written_bytes_total", "counter", "Bytes written to the disk tier.", static_cast<double>(d.bytes_written));
    w.metric("loom_kv_disk_writes_dropped_total", "counter", "Blocks not written: the write queue was full or the disk refused.",
             static_cast<double>(d.writes_dropped));
    w.metric("loom_kv_disk_evictions_total", "counter", "Block files deleted to stay within the capacity.",
             static_cast<double>(d.evictions));
    w.metric("loom_kv_disk_files_rejected_total", "counter",
             "Corrupt, truncated or foreign (other model or KV type) block files skipped, never loaded.",
             static_cast<double>(d.files_rejected));
  }

  w.metric("loom_images_encoded_total", "counter", "Images run through the vision encoder ([model] mmproj).",
           static_cast<double>(s.images_encoded));
  w.metric("loom_image_cache_hits_total", "counter", "Images whose rows came from the encoder's cache (the same image again).",
           static_cast<double>(s.image_cache_hits));
  w.metric("loom_image_encoder_seconds_total", "counter", "Time the vision encoder took.", s.encoder_seconds);
  w.metric("loom_prompt_tokens_total", "counter", "Prompt tokens of submitted requests.", static_cast<double>(s.prompt_tokens));
  w.metric("loom_cached_prompt_tokens_total", "counter", "Prompt tokens served from the prefix cache.",
           static_cast<double>(s.cached_prompt_tokens));
  w.metric("loom_generation_tokens_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens));
  w.metric("loom_engine_steps_total", "counter", "Forward passes (scheduler steps).", static_cast<double>(s.steps));
  w.metric("loom_preemptions_total", "counter", "Sequences preempted (recomputed later) for lack of KV blocks.",
           static_cast<double>(s.preemptions));
  w.metric("loom_draft_tokens_proposed_total", "counter", "Speculative tokens proposed.",
           static_cast<double>(s.draft_tokens_proposed));
  w.metric("loom_draft_tokens_accepted_total", "counter", "Speculative tokens accepted.",
           static_cast<double>(s.draft_tokens_accepted));

  w.histogram("loom_time_to_first_token_seconds", "Time from arrival to the first generated token.", s.ttft);
  w.histogram("loom_time_per_output_token_seconds", "Time between generated tokens.", s.tpot);
  w.histogram("loom_request_queue_time_seconds", "Time from arrival to first scheduling.", s.queue_time);
  render_vllm_compatible(w, s, state);
  return w.str();
}

}  // namespace loom::server
