// The schema of loom.toml: every section, key, type and allowed range in one table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config/config.h"

namespace loom {

struct KeySpec {
  std::string section;
  std::string key;
  std::string allowed;  // human description of what is allowed, for error messages and docs
  // Check the node and store it; returns an error text ("" when fine).
  std::function<std::string(Config&, const toml::node&)> assign;
  std::function<std::string(const Config&)> render;  // value as TOML
  // Set only for a table of free-form keys ([backend.options]): checks and stores one entry, so that an error
  // names that entry's own line and key. The key's value must then be a table, and `assign` is not used.
  std::function<std::string(Config&, const std::string& entry, const toml::node&)> assign_entry;
};

const std::vector<KeySpec>& config_schema();

}  // namespace loom
