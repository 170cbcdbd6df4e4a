// `loom config check FILE`: validate a configuration and print it fully resolved.
#include <iostream>

#include "command.h"
#include "config/config.h"

namespace loom::host {

namespace {

int run_config(const CommandArgs& given) {
  // `loom config check -- FILE`: the `--` only guards a FILE that starts with '-'.
  CommandArgs args = given;
  if (args.size() == 3 && args[0] == "check" && args[1] == "--") args.erase(args.begin() + 1);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] != "check" || args.size() != 2) {
    std::cout << "usage: loom config check [--] FILE\n\nValidates FILE against the schema and prints the resolved "
                 "configuration (defaults filled in). `--` lets FILE start with '-'.\n";
    return args.empty() || args[0] == "--help" || args[0] == "-h" ? 0 : 2;
  }
  Config config = load_config(args[1]);
  std::cout << config_to_toml(config);
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("config", "validate a loom.toml and print the resolved configuration", run_config);

}  // namespace loom::host
