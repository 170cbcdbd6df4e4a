// Plugin discovery and loading.
//
// Discovery walks a search path (config `plugins.search_path`, then the LOOM_PLUGIN_PATH environment
// variable, then the folder beside the `loom` binary) for manifests (`*.toml`) and the libraries
// they name. Each library is loaded with Boost.DLL, its `loom_plugin_query` is called with the host's
// ABI version, and the answer is checked (version, kind, struct sizes, mandatory slots). Every failure
// is recorded with the file and the reason; one bad plugin never stops the others from loading.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loom {

struct PluginManifest {
  std::string name;
  std::string kind;         // "backend", "kv", "quantizer", "sampler", "drafter"
  std::string library;      // file name, relative to the manifest's folder
  std::string version;
  std::string description;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::filesystem::path manifest_path;
};

// Reads and validates a manifest; throws loom::Error naming the file and the problem.
PluginManifest read_plugin_manifest(const std::filesystem::path& manifest_path);

std::string plugin_kind_name(loom_plugin_kind kind);
std::optional<loom_plugin_kind> plugin_kind_from_name(const std::string& name);

// A loaded plugin library. Keeps the library mapped while alive; tables and strings it hands out
// are valid as long as this object is.
class LoadedPlugin {
 public:
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const std::filesystem::path& library_path() const { return library_path_; }
  const std::optional<PluginManifest>& manifest() const { return manifest_; }
  const loom_plugin_desc& desc() const { return *desc_; }
  loom_plugin_kind kind() const { return desc_->kind; }
  std::string name() const { return desc_->name ? desc_->name : ""; }

  // The kind's table; nullptr when the plugin is of another kind.
  const loom_backend_i* backend() const;
  const loom_kv_i* kv() const;
  const loom_quantizer_i* quantizer() const;
  const loom_sampler_i* sampler() const;
  const loom_drafter_i* drafter() const;

  // Call the entry point again as a host of another ABI version would (conformance uses this to
  // check that a plugin refuses an incompatible major and accepts a newer minor).
  loom_status query_as(uint32_t abi_major, uint32_t abi_minor, const loom_plugin_desc** out_desc) const;

 private:
  friend class PluginLoader;
  LoadedPlugin() = default;
  struct Library;
  std::unique_ptr<Library> library_;
  std::filesystem::path library_path_;
  std::optional<PluginManifest> manifest_;
  const loom_plugin_desc* desc_ = nullptr;
  loom_plugin_query_fn query_ = nullptr;
};

struct PluginLoadError {
  std::filesystem::path file;  // the manifest or library that failed
  std::string reason;
};

class PluginLoader {
 public:
  // Load one library directly (conformance --plugin PATH). Throws loom::Error with file and reason.
  static std::shared_ptr<LoadedPlugin> load_library(const std::filesystem::path& library_path,
                                                    std::optional<PluginManifest> manifest = std::nullopt);
  // Load the library a manifest names.
  static std::shared_ptr<LoadedPlugin> load_manifest(const std::filesystem::path& manifest_path);
};

// The folders searched, in order: `configured`, then $LOOM_PLUGIN_PATH (':'-separated), then the
// default plugin folder next to the running binary (../lib/loom/plugins).
std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::filesystem::path>& configured = {});

struct PluginDiscovery {
  std::vector<std::shared_ptr<LoadedPlugin>> plugins;
  std::vector<PluginLoadError> errors;

  // First loaded plugin of this kind and name (name empty = any of the kind).
  std::shared_ptr<LoadedPlugin> find(loom_plugin_kind kind, const std::string& name = "") const;
};

// Discover and load every plugin on the search path. Never throws for a bad plugin.
PluginDiscovery discover_plugins(const std::vector<std::filesystem::path>& search_path);

}  // namespace loom
