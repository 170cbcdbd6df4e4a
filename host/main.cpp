// loom — the command-line host. `loom help` lists the subcommands.
#include <algorithm>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "command.h"

namespace {

int print_help() {
  std::cout << "loom — LLM inference engine\n\nusage: loom <command> [args...]\n\ncommands:\n";
  auto sorted = loom::host::commands();
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  for (const auto& command : sorted) {
    std::cout << "  " << command.name << std::string(14 - std::min<size_t>(13, std::strlen(command.name)), ' ')
              << command.summary << "\n";
  }
  std::cout << "\nRun `loom <command> --help` for a command's options.\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    return print_help();
  }
  const std::string name = argv[1];
  for (const auto& command : loom::host::commands()) {
    if (name != command.name) continue;
    try {
      return command.run(loom::host::CommandArgs(argv + 2, argv + argc));
    } catch (const std::exception& e) {
      std::cerr << "loom " << name << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "loom: unknown command '" << name << "' (run `loom help`)\n";
  return 2;
}
