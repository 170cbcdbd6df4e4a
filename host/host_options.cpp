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
  if (args[i] == "--lora") {
    if (i + 1 >= args.size()) throw std::runtime_error("option --lora needs NAME=PATH[:SCALE]");
    const std::string spec = args[++i];
    const size_t eq = spec.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == spec.size())
      throw std::runtime_error("option --lora needs NAME=PATH[:SCALE], got '" + spec + "'");
    LoraSettings lora{spec.substr(0, eq), spec.substr(eq + 1), 1.0};
    // A trailing :SCALE when what follows the last ':' is a number (a path may hold ':' too).
    if (const size_t colon = lora.path.rfind(':'); colon != std::string::npos && colon + 1 < lora.path.size()) {
      try {
        size_t used = 0;
        const double scale = std::stod(lora.path.substr(colon + 1), &used);
        if (used == lora.path.size() - colon - 1) {
          if (!(scale >= 0.0) || scale > 100.0) throw std::runtime_error("option --lora: SCALE must be from 0 to 100");
          lora.scale = scale;
          lora.path.resize(colon);
        }
      } catch (const std::invalid_argument&) {
      }
    }
    loras.push_back(std::move(lora));
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
  for (const LoraSettings& lora : loras) {
    for (const LoraSettings& other : config.loras)
      if (other.name == lora.name) throw std::runtime_error("--lora " + lora.name + ": an adapter of that name is configured already");
    config.loras.push_back(lora);
  }
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
