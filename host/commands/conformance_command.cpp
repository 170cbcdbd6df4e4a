// `loom conformance`: run the conformance suite for one plugin (--plugin PATH) or for every plugin on
// the search path, and write a summary plus JSON and JUnit XML reports.
#include <fstream>
#include <iostream>

#include "command.h"
#include "conformance_runner.h"
#include "host_options.h"
#include "plugin/plugin_registry.h"

namespace loom::host {

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
}

int run_conformance_command(const CommandArgs& args) {
  HostOptions options;
  std::vector<std::string> plugin_paths;
  std::string json_path, junit_path, filter, plugin_config = "{}";
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      if (!nothing_after_end_of_options("conformance", args, i)) return 2;
      break;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << "usage: loom conformance [--plugin PATH]... [--config FILE] [--filter TEXT]\n"
                   "                        [--plugin-config JSON] [--json FILE] [--junit FILE]\n\n"
                   "Runs the conformance cases of each plugin's kind through the production loader.\n"
                   "Without --plugin, tests every plugin on the search path. Exit status 1 if any case fails.\n";
      return 0;
    } else if (a == "--plugin") {
      plugin_paths.push_back(value());
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--junit") {
      junit_path = value();
    } else if (a == "--filter") {
      filter = value();
    } else if (a == "--plugin-config") {
      plugin_config = value();
    } else if (!options.parse(args, i)) {
      std::cerr << "loom conformance: unknown argument '" << a << "'\n";
      return 2;
    }
  }

  std::vector<std::shared_ptr<LoadedPlugin>> plugins;
  int load_failures = 0;
  if (plugin_paths.empty()) {
    Config config = options.load_config();
    auto found = discover_plugins(plugin_search_path({config.plugins.search_path.begin(), config.plugins.search_path.end()}));
    plugins = found.plugins;
    for (const auto& error : found.errors) {
      std::cerr << "load error: " << error.reason << "\n";
      ++load_failures;
    }
  } else {
    for (const auto& path : plugin_paths) {
      try {
        std::filesystem::path p(path);
        plugins.push_back(p.extension() == ".toml" ? PluginLoader::load_manifest(p) : PluginLoader::load_library(p));
      } catch (const std::exception& e) {
        std::cerr << "load error: " << e.what() << "\n";
        ++load_failures;
      }
    }
  }

  std::vector<conformance::PluginReport> reports;
  for (const auto& plugin : plugins) reports.push_back(conformance::run_conformance(plugin, plugin_config, filter));
  conformance::print_summary(std::cout, reports);
  if (!json_path.empty()) write_file(json_path, conformance::reports_to_json(reports));
  if (!junit_path.empty()) write_file(junit_path, conformance::reports_to_junit(reports));

  int failed = load_failures;
  int passed = 0, unsupported = 0;
  for (const auto& r : reports) {
    failed += r.n_fail();
    passed += r.n_pass();
    unsupported += r.n_not_supported();
  }
  std::cout << "conformance: " << passed << " passed, " << failed << " failed, " << unsupported
            << " not supported\n";
  return failed == 0 && !plugins.empty() ? 0 : 1;
}

}  // namespace

LOOM_REGISTER_COMMAND("conformance", "run the plugin conformance suite (JSON / JUnit reports)", run_conformance_command);

}  // namespace loom::host
