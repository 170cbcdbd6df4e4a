// What config.cpp and config_models.cpp share while reading a file: every problem collected with its
// line, so one run reports them all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "common/error.h"
#include "config/config.h"

namespace loom {

// Every problem of a file, so that one run reports them all (toml++ walks tables in key order, not file order).
class ConfigErrors {
 public:
  void add(const toml::node& node, std::string text) { errors_.emplace_back(node.source().begin.line, std::move(text)); }
  bool empty() const { return errors_.empty(); }
  // One loom::Error naming every problem, one per line in file order.
  [[noreturn]] void raise() {
    std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string message;
    if (errors_.size() > 1) message = std::to_string(errors_.size()) + " errors in the configuration:\n";
    for (size_t i = 0; i < errors_.size(); ++i) message += (i ? "\n" : "") + errors_[i].second;
    throw Error(message);
  }

 private:
  std::vector<std::pair<uint32_t, std::string>> errors_;
};

inline std::string location(const std::filesystem::path& file, const toml::node& node) {
  return file.string() + ":" + std::to_string(node.source().begin.line);
}

// [[models]]: name, path and the optional per-model keys (config_models.cpp).
void apply_model_entries(Config& config, const std::filesystem::path& file, const toml::node& node, ConfigErrors& errors);
std::string model_entries_to_toml(const std::vector<ModelEntrySettings>& models);

}  // namespace loom
