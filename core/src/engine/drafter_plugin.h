// PluginDrafter — a Drafter backed by a drafter plugin instance (loom/drafter.h). It checks what the
// plugin returns (counts, token ids, distributions) so a faulty plugin can cost speed but never
// make the engine read out of bounds.
#pragma once

#include <memory>
#include <string>

#include "engine/drafter_interface.h"
#include "loom/drafter.h"

namespace loom {

class LoadedPlugin;
struct Config;

class PluginDrafter : public Drafter {
 public:
  // Creates an instance with `host` (the engine's services, including model_*) and `config_json`.
  // loom::Error with the plugin's message when it refuses.
  PluginDrafter(std::shared_ptr<LoadedPlugin> plugin, const loom_host_services* host, const std::string& config_json);
  ~PluginDrafter() override;
  PluginDrafter(const PluginDrafter&) = delete;
  PluginDrafter& operator=(const PluginDrafter&) = delete;

  std::string name() const override;
  void propose(std::vector<DraftJob>& jobs, uint32_t n_vocab) override;
  void accepted(uint64_t seq_id, uint32_t n_tokens) override;
  void release(uint64_t seq_id) override;

 private:
  [[noreturn]] void fail(loom_status status, const char* what) const;

  std::shared_ptr<LoadedPlugin> plugin_;
  const loom_drafter_i* table_ = nullptr;
  loom_drafter_t* drafter_ = nullptr;
  std::vector<loom_draft_request> requests_;
};

// The config_json the engine gives a drafter plugin for the [drafter] settings.
std::string drafter_config_json(const Config& config);

}  // namespace loom
