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
  if (args[i] == "--mmproj") {
    if (i + 1 >= args.size()) throw std::runtime_error("option --mmproj needs a file");
    mmproj = args[++i];
    return true;
  }
  return false;
}

Config HostOptions::load_config() const {
  Config config;
  if (!config_path.empty()) config = loom::load_config(config_path);
  else if (const char* env = std::getenv("LOOM_CONFIG"); env != nullptr && *env != '\0') config = loom::load_config(env);
  else if (std::filesystem::exists("loom.toml")) config = loom::load_config("loom.toml");
  if (!mmproj.empty()) config.model.mmproj = mmproj;
  return config;
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
