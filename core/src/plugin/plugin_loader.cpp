#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <set>

#include "common/error.h"
#include "plugin/plugin_registry.h"
#include "plugin/table_validation.h"

namespace loom {

struct LoadedPlugin::Library {
  boost::dll::shared_library library;
};

LoadedPlugin::~LoadedPlugin() = default;

namespace {

template <class Table>
const Table* table_if(const loom_plugin_desc* desc, loom_plugin_kind kind) {
  return desc->kind == kind ? static_cast<const Table*>(desc->table) : nullptr;
}

std::string version_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Everything the host must know before trusting a descriptor.
void validate_descriptor(const std::filesystem::path& path, const loom_plugin_desc* desc) {
  const std::string where = path.string() + ": ";
  if (desc == nullptr) throw Error(where + "loom_plugin_query returned no descriptor");
  if (desc->struct_size < offsetof(loom_plugin_desc, table) + sizeof(desc->table)) {
    throw Error(where + "plugin descriptor struct_size " + std::to_string(desc->struct_size) +
                " is smaller than ABI 1.0's " + std::to_string(sizeof(loom_plugin_desc)));
  }
  if (desc->abi_major != LOOM_ABI_MAJOR) {
    throw Error(where + "plugin speaks ABI " + version_string(desc->abi_major, desc->abi_minor) +
                ", this host speaks ABI " + version_string(LOOM_ABI_MAJOR, LOOM_ABI_MINOR) +
                " (major versions must match)");
  }
  if (desc->name == nullptr || desc->name[0] == '\0') throw Error(where + "plugin descriptor has no name");
  if (auto problem = validate_plugin_table(desc->kind, desc->table)) {
    throw Error(where + "plugin '" + desc->name + "': " + *problem);
  }
}

}  // namespace

const loom_backend_i* LoadedPlugin::backend() const { return table_if<loom_backend_i>(desc_, LOOM_PLUGIN_KIND_BACKEND); }
const loom_kv_i* LoadedPlugin::kv() const { return table_if<loom_kv_i>(desc_, LOOM_PLUGIN_KIND_KV); }
const loom_quantizer_i* LoadedPlugin::quantizer() const {
  return table_if<loom_quantizer_i>(desc_, LOOM_PLUGIN_KIND_QUANTIZER);
}
const loom_sampler_i* LoadedPlugin::sampler() const { return table_if<loom_sampler_i>(desc_, LOOM_PLUGIN_KIND_SAMPLER); }
const loom_drafter_i* LoadedPlugin::drafter() const { return table_if<loom_drafter_i>(desc_, LOOM_PLUGIN_KIND_DRAFTER); }

loom_status LoadedPlugin::query_as(uint32_t abi_major, uint32_t abi_minor, const loom_plugin_desc** out_desc) const {
  loom_host_version host{sizeof(loom_host_version), abi_major, abi_minor, 0};
  return query_(&host, out_desc);
}

std::shared_ptr<LoadedPlugin> PluginLoader::load_library(const std::filesystem::path& library_path,
                                                         std::optional<PluginManifest> manifest) {
  const std::string where = library_path.string() + ": ";
  if (!std::filesystem::exists(library_path)) throw Error(where + "plugin library not found");

  auto plugin = std::shared_ptr<LoadedPlugin>(new LoadedPlugin());
  plugin->library_path_ = library_path;
  plugin->manifest_ = std::move(manifest);
  plugin->library_ = std::make_unique<LoadedPlugin::Library>();
  try {
    // rtld_local keeps each plugin's symbols to itself, so two plugins may use the same names.
    plugin->library_->library.load(library_path, boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now);
  } catch (const std::exception& e) {
    throw Error(where + "cannot load the library: " + e.what());
  }
  if (!plugin->library_->library.has(LOOM_PLUGIN_ENTRY_SYMBOL)) {
    throw Error(where + "not a Loom plugin: the library does not export '" LOOM_PLUGIN_ENTRY_SYMBOL "'");
  }
  loom_plugin_query_fn query =
      &plugin->library_->library.get<loom_status(const loom_host_version*, const loom_plugin_desc**)>(
          LOOM_PLUGIN_ENTRY_SYMBOL);

  loom_host_version host{sizeof(loom_host_version), LOOM_ABI_MAJOR, LOOM_ABI_MINOR, 0};
  const loom_plugin_desc* desc = nullptr;
  loom_status status = LOOM_STATUS_INTERNAL;
  try {
    status = query(&host, &desc);
  } catch (...) {
    throw Error(where + "loom_plugin_query threw a C++ exception across the C ABI");
  }
  if (status == LOOM_STATUS_VERSION_MISMATCH) {
    std::string wanted = desc && desc->struct_size >= offsetof(loom_plugin_desc, abi_minor) + sizeof(uint32_t)
                             ? " (it speaks ABI " + version_string(desc->abi_major, desc->abi_minor) + ")"
                             : "";
    throw Error(where + "plugin refused this host's ABI " + version_string(LOOM_ABI_MAJOR, LOOM_ABI_MINOR) + wanted);
  }
  if (status != LOOM_STATUS_OK) {
    throw Error(where + "loom_plugin_query failed with status " + std::to_string(status));
  }
  validate_descriptor(library_path, desc);
  plugin->desc_ = desc;
  plugin->query_ = query;

  if (plugin->manifest_) {
    const auto& m = *plugin->manifest_;
    if (plugin_kind_from_name(m.kind) != desc->kind) {
      throw Error(m.manifest_path.string() + ": manifest says kind '" + m.kind + "' but the library reports '" +
                  plugin_kind_name(desc->kind) + "'");
    }
    if (m.name != desc->name) {
      throw Error(m.manifest_path.string() + ": manifest says name '" + m.name + "' but the library reports '" +
                  desc->name + "'");
    }
  }
  return plugin;
}

std::shared_ptr<LoadedPlugin> PluginLoader::load_manifest(const std::filesystem::path& manifest_path) {
  PluginManifest manifest = read_plugin_manifest(manifest_path);
  if (manifest.abi_major != LOOM_ABI_MAJOR) {
    throw Error(manifest_path.string() + ": manifest declares ABI " +
                version_string(manifest.abi_major, manifest.abi_minor) + ", this host speaks ABI " +
                version_string(LOOM_ABI_MAJOR, LOOM_ABI_MINOR));
  }
  auto library_path = manifest_path.parent_path() / manifest.library;
  if (!std::filesystem::exists(library_path)) {
    throw Error(manifest_path.string() + ": the library it names, '" + library_path.string() + "', does not exist");
  }
  return load_library(library_path, std::move(manifest));
}

std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::filesystem::path>& configured) {
  std::vector<std::filesystem::path> folders = configured;
  if (const char* env = std::getenv("LOOM_PLUGIN_PATH"); env != nullptr) {
    std::string value = env;
    size_t start = 0;
    while (start <= value.size()) {
      size_t end = value.find(':', start);
      if (end == std::string::npos) end = value.size();
      if (end > start) folders.emplace_back(value.substr(start, end - start));
      start = end + 1;
    }
  }
  // Beside the running program: build/bin/loom -> build/lib/loom/plugins, and the same when installed.
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) folders.push_back(self.parent_path().parent_path() / "lib" / "loom" / "plugins");
  return folders;
}

std::shared_ptr<LoadedPlugin> PluginDiscovery::find(loom_plugin_kind kind, const std::string& name) const {
  for (const auto& plugin : plugins) {
    if (plugin->kind() == kind && (name.empty() || plugin->name() == name)) return plugin;
  }
  return nullptr;
}

PluginDiscovery discover_plugins(const std::vector<std::filesystem::path>& search_path) {
  PluginDiscovery found;
  std::set<std::string> seen_names;  // the first folder on the path wins, as with PATH
  for (const auto& folder : search_path) {
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec)) continue;
    std::vector<std::filesystem::path> manifests;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
      if (entry.path().extension() == ".toml") manifests.push_back(entry.path());
    }
    std::sort(manifests.begin(), manifests.end());
    for (const auto& manifest : manifests) {
      try {
        auto plugin = PluginLoader::load_manifest(manifest);
        std::string key = plugin_kind_name(plugin->kind()) + "/" + plugin->name();
        if (!seen_names.insert(key).second) continue;
        found.plugins.push_back(std::move(plugin));
      } catch (const std::exception& e) {
        found.errors.push_back({manifest, e.what()});
      }
    }
  }
  return found;
}

}  // namespace loom
