// Runs the cases of a plugin's kind and writes the human summary, JSON and JUnit XML reports.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "conformance_case.h"

namespace loom::conformance {

struct PluginReport {
  std::string plugin_name;
  std::string plugin_kind;
  std::string library;
  std::vector<CaseResult> results;
  int n_pass() const;
  int n_fail() const;
  int n_not_supported() const;
};

// Run every case that applies to the plugin's kind. `filter` (substring) selects cases by name.
PluginReport run_conformance(const std::shared_ptr<LoadedPlugin>& plugin, const std::string& config_json = "{}",
                             const std::string& filter = "");

void print_summary(std::ostream& out, const std::vector<PluginReport>& reports);
std::string reports_to_json(const std::vector<PluginReport>& reports);
std::string reports_to_junit(const std::vector<PluginReport>& reports);

}  // namespace loom::conformance
