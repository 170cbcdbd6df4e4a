#include "command.h"

namespace loom::host {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> all;  // function-local: safe from static initialisation order
  return all;
}
}  // namespace

const std::vector<Command>& commands() { return registry(); }

CommandRegistrar::CommandRegistrar(const Command& command) { registry().push_back(command); }

}  // namespace loom::host
