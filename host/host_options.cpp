#include "host_options.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace loom::host {

bool HostOptions::parse(const CommandArgs& args, size_t& i) {
  if (args[i] == "--config" || args[i] == "-c") {
    if (i + 1 >= args.size()) throw std::runtime_error("option --config needs a file");
    config_path = args[++i];
    return true;
  }
  return false;
}

Config HostOptions::load_config() const {
  if (!config_path.empty()) return loom::load_config(config_path);
  if (const char* env = std::getenv("LOOM_CONFIG"); env != nullptr && *env != '\0') return loom::load_config(env);
  if (std::filesystem::exists("loom.toml")) return loom::load_config("loom.toml");
  return Config{};
}

}  // namespace loom::host
