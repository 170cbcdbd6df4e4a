// Subcommands of the `loom` program. Each lives in commands/NAME_command.cpp and registers itself,
// so adding one touches no other file.
#pragma once

#include <string>
#include <vector>

namespace loom::host {

using CommandArgs = std::vector<std::string>;  // arguments after the subcommand name

struct Command {
  const char* name;     // "plugins"
  const char* summary;  // one line for `loom help`
  int (*run)(const CommandArgs& args);
};

const std::vector<Command>& commands();

struct CommandRegistrar {
  explicit CommandRegistrar(const Command& command);
};

}  // namespace loom::host

#define LOOM_CONCAT_INNER(a, b) a##b
#define LOOM_CONCAT(a, b) LOOM_CONCAT_INNER(a, b)
// LOOM_REGISTER_COMMAND("plugins", "list plugins", run_plugins);
#define LOOM_REGISTER_COMMAND(name, summary, fn) \
  static const ::loom::host::CommandRegistrar LOOM_CONCAT(loom_command_registrar_, __LINE__){{name, summary, fn}}
