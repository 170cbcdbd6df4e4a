#include "server/engine_state.h"

#include <chrono>

namespace loom::server {

namespace {

// The prefix cache's disk tier; null when [kv] disk_cache_path is not set.
nlohmann::json disk_cache_state(const EngineStats& s) {
  if (!s.disk_tier) return nullptr;
  const DiskTierStats& d = s.disk;
  return {{"blocks", d.files},
          {"bytes", d.bytes},
          {"capacity_bytes", d.capacity_bytes},
          {"hit_tokens", s.disk_cached_tokens},
          {"blocks_read", d.blocks_read},
          {"read_bytes", d.bytes_read},
          {"read_seconds", d.read_seconds},
          {"blocks_written", d.blocks_written},
          {"writes_dropped", d.writes_dropped},
          {"evictions", d.evictions},
          {"files_rejected", d.files_rejected}};
}

// The vision encoder ([model] mmproj); null when the model takes no images.
nlohmann::json vision_state(const EngineStats& s, const EngineInfo& info) {
  if (info.mmproj_path.empty()) return nullptr;
  return {{"mmproj", info.mmproj_path},
          {"projector", info.projector},
          {"image_rows", info.image_rows},
          {"images_encoded", s.images_encoded},
          {"cache_hits", s.image_cache_hits},
          {"encoder_seconds", s.encoder_seconds}};
}

}  // namespace

nlohmann::json engine_state(const ServerState& state) {
  const EngineStats s = state.engine.stats();
  const EngineInfo& info = state.engine.info();
  const ModelInfo& model = state.engine.model_info();
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json plugins = nlohmann::json::array();
  for (const PluginSummary& p : info.plugins) plugins.push_back({{"kind", p.kind}, {"name", p.name}, {"version", p.version}});
  return {
      {"time", now},
      {"uptime_seconds", now - static_cast<double>(state.created)},
      {"model",
       {{"name", state.model_name}, {"architecture", model.arch_name}, {"n_ctx", info.n_ctx}, {"file", info.model_path}}},
      {"backend", {{"name", info.backend_name}, {"device", info.device_name}}},
      {"plugins", plugins},
      {"requests", {{"running", s.running}, {"waiting", s.waiting}, {"finished_total", s.requests_finished}}},
      {"kv",
       {{"block_size", s.kv_block_size},
        {"blocks_total", s.kv_blocks_total},
        {"blocks_used", s.kv_blocks_used},
        {"blocks_cached", s.kv_blocks_cached},  // also counted as free: evicted on demand
        {"blocks_free", s.kv_blocks_free}}},
      {"prefix_cache",
       {{"hit_rate", s.prompt_tokens ? double(s.cached_prompt_tokens) / double(s.prompt_tokens) : 0.0},
        {"prompt_tokens", s.prompt_tokens},
        {"cached_prompt_tokens", s.cached_prompt_tokens}}},
      {"tokens", {{"generated_total", s.generated_tokens}, {"prompt_total", s.prompt_tokens}}},
      {"disk_cache", disk_cache_state(s)},
      {"vision", vision_state(s, info)},
  };
}

}  // namespace loom::server
