// Options every subcommand understands: --config FILE (default: $LOOM_CONFIG, else ./loom.toml if
// present, else built-in defaults).
#pragma once

#include <string>

#include "command.h"
#include "config/config.h"

namespace loom::host {

struct HostOptions {
  std::string config_path;

  // Consume args[i] (and its value) if it is a common option; returns false otherwise.
  bool parse(const CommandArgs& args, size_t& i);
  Config load_config() const;
};

}  // namespace loom::host
