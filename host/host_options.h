// Options every subcommand understands: --config FILE (default: $LOOM_CONFIG, else ./loom.toml if
// present, else built-in defaults), --mmproj FILE, and --lora NAME=PATH[:SCALE] (repeatable: a
// run-time adapter beside the [[lora]] entries).
#pragma once

#include <string>
#include <vector>

#include "command.h"
#include "config/config.h"

namespace loom::host {

struct HostOptions {
  std::string config_path;
  std::string mmproj;  // --mmproj FILE: the vision projector, over [model] mmproj
  std::vector<LoraSettings> loras;  // --lora NAME=PATH[:SCALE], after [[lora]]'s

  // Consume args[i] (and its value) if it is a common option; returns false otherwise.
  bool parse(const CommandArgs& args, size_t& i);
  Config load_config() const;
};

// `--` ends a command's options (POSIX): what follows is positional even when it starts with '-'
// (`loom tokenize --model M -- -hello`). When args[i] is "--", appends the arguments after it to
// `positional`, moves i past the end (the caller's option loop ends) and returns true.
bool end_of_options(const CommandArgs& args, size_t& i, std::vector<std::string>& positional);

// For commands without positional arguments, at a `--` in args[i]: true when nothing follows it;
// otherwise prints "loom COMMAND: unexpected argument ..." and returns false.
bool nothing_after_end_of_options(const char* command, const CommandArgs& args, size_t i);

}  // namespace loom::host
