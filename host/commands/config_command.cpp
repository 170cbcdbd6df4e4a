// `loom config check FILE`: validate a configuration and print it fully resolved.
#include <iostream>

#include "command.h"
#include "config/config.h"

namespace loom::host {

namespace {

int run_config(const CommandArgs& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] != "check" || args.size() != 2) {
    std::cout << "usage: loom config check FILE\n\nValidates FILE against the schema and prints the resolved "
                 "configuration (defaults filled in).\n";
    return args.empty() || args[0] == "--help" || args[0] == "-h" ? 0 : 2;
  }
  Config config = load_config(args[1]);
  std::cout << config_to_toml(config);
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("config", "validate a loom.toml and print the resolved configuration", run_config);

}  // namespace loom::host
