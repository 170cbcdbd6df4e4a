#include "host_options.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
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

bool end_of_options(const CommandArgs& args, size_t& i, std::vector<std::string>& positional) {
  if (args[i] != "--") return false;
  positional.insert(positional.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  i = args.size();
  return true;
}

bool nothing_after_end_of_options(const char* command, const CommandArgs& args, size_t i) {
  if (i + 1 >= args.size()) return true;
  std::cerr << "loom " << command << ": unexpected argument '" << args[i + 1] << "' (it takes no positional arguments)\n";
  return false;
}

}  // namespace loom::host
