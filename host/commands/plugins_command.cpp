// `loom plugins`: every discovered plugin with kind, version, ABI, capabilities, and load errors.
#include <iostream>

#include "command.h"
#include "config/config.h"
#include "gguf/dtype_traits.h"
#include "host_options.h"
#include "plugin/host_services.h"
#include "plugin/plugin_registry.h"

namespace loom::host {

namespace {

void print_backend_details(const LoadedPlugin& plugin) {
  const auto* backend = plugin.backend();
  uint32_t n_devices = 0;
  char reason[256] = {};
  if (backend->device_count(&n_devices, reason, sizeof(reason)) != LOOM_STATUS_OK || n_devices == 0) {
    std::cout << "      devices: none (" << reason << ")\n";
    return;
  }
  for (uint32_t i = 0; i < n_devices; ++i) {
    char name[256] = "unnamed";
    if (backend->device_name) backend->device_name(i, name, sizeof(name));
    std::cout << "      device " << i << ": " << name << "\n";
  }
  loom_backend_t* instance = nullptr;
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  if (backend->create(default_host_services(), "{}", &instance, error, sizeof(error)) != LOOM_STATUS_OK) {
    std::cout << "      cannot create: " << error << "\n";
    return;
  }
  loom_backend_caps caps{};
  caps.struct_size = sizeof(caps);
  if (backend->get_caps(instance, &caps) == LOOM_STATUS_OK) {
    std::cout << "      weight formats:";
    for (uint32_t i = 0; i < caps.n_weight_dtypes && i < LOOM_BACKEND_MAX_DTYPES; ++i) {
      std::cout << " " << dtype_name(caps.weight_dtypes[i]);
    }
    std::cout << "; KV types:";
    for (uint32_t i = 0; i < caps.n_kv_dtypes && i < 8; ++i) std::cout << " " << dtype_name(caps.kv_dtypes[i]);
    std::cout << "; max head dim " << caps.max_head_dim << "\n";
  }
  backend->destroy(instance);
}

int run_plugins(const CommandArgs& args) {
  HostOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      if (!nothing_after_end_of_options("plugins", args, i)) return 2;
      break;
    }
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << "usage: loom plugins [--config FILE]\n\nLists the plugins found on the search path "
                   "(plugins.search_path, $LOOM_PLUGIN_PATH, the folder beside loom) and why any failed to load.\n";
      return 0;
    }
    if (!options.parse(args, i)) {
      std::cerr << "loom plugins: unknown argument '" << args[i] << "'\n";
      return 2;
    }
  }
  Config config = options.load_config();
  auto search_path = plugin_search_path({config.plugins.search_path.begin(), config.plugins.search_path.end()});
  auto found = discover_plugins(search_path);

  std::cout << "search path:\n";
  for (const auto& folder : search_path) std::cout << "  " << folder.string() << "\n";
  std::cout << "\nplugins (" << found.plugins.size() << "):\n";
  for (const auto& plugin : found.plugins) {
    const auto& d = plugin->desc();
    std::cout << "  " << plugin->name() << "  kind=" << plugin_kind_name(d.kind) << "  version=" << d.version
              << "  abi=" << d.abi_major << "." << d.abi_minor << "\n      " << d.description << "\n      "
              << plugin->library_path().string() << "\n";
    if (plugin->backend()) print_backend_details(*plugin);
  }
  if (!found.errors.empty()) {
    std::cout << "\nload errors (" << found.errors.size() << "):\n";
    for (const auto& error : found.errors) std::cout << "  " << error.reason << "\n";
  }
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("plugins", "list discovered plugins, their capabilities and load errors", run_plugins);

}  // namespace loom::host
