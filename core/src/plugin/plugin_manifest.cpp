#include <toml++/toml.h>

#include "common/error.h"
#include "plugin/plugin_registry.h"

namespace loom {

namespace {

std::string required_string(const toml::table& table, const char* key, const std::filesystem::path& path) {
  const auto* node = table.get(key);
  if (node == nullptr) throw Error(path.string() + ": manifest is missing the key '" + key + "'");
  auto value = node->value<std::string>();
  if (!value || value->empty()) {
    throw Error(path.string() + ":" + std::to_string(node->source().begin.line) + ": manifest key '" + key +
                "' must be a non-empty string");
  }
  return *value;
}

uint32_t required_version(const toml::table& table, const char* key, const std::filesystem::path& path) {
  const auto* node = table.get(key);
  if (node == nullptr) throw Error(path.string() + ": manifest is missing the key '" + key + "'");
  auto value = node->value<int64_t>();
  if (!value || *value < 0 || *value > 0xFFFF) {
    throw Error(path.string() + ":" + std::to_string(node->source().begin.line) + ": manifest key '" + key +
                "' must be an integer in 0..65535");
  }
  return static_cast<uint32_t>(*value);
}

}  // namespace

PluginManifest read_plugin_manifest(const std::filesystem::path& manifest_path) {
  toml::table table;
  try {
    table = toml::parse_file(manifest_path.string());
  } catch (const toml::parse_error& e) {
    throw Error(manifest_path.string() + ":" + std::to_string(e.source().begin.line) +
                ": bad plugin manifest: " + std::string(e.description()));
  }
  PluginManifest manifest;
  manifest.manifest_path = manifest_path;
  manifest.name = required_string(table, "name", manifest_path);
  manifest.kind = required_string(table, "kind", manifest_path);
  manifest.library = required_string(table, "library", manifest_path);
  manifest.abi_major = required_version(table, "abi_major", manifest_path);
  manifest.abi_minor = required_version(table, "abi_minor", manifest_path);
  manifest.version = table["version"].value_or(std::string());
  manifest.description = table["description"].value_or(std::string());
  if (!plugin_kind_from_name(manifest.kind)) {
    throw Error(manifest_path.string() + ": manifest kind '" + manifest.kind +
                "' is not one of backend, kv, quantizer, sampler, drafter");
  }
  if (std::filesystem::path(manifest.library).has_parent_path()) {
    throw Error(manifest_path.string() + ": manifest library '" + manifest.library +
                "' must be a file name beside the manifest, not a path");
  }
  return manifest;
}

std::string plugin_kind_name(loom_plugin_kind kind) {
  switch (kind) {
    case LOOM_PLUGIN_KIND_BACKEND: return "backend";
    case LOOM_PLUGIN_KIND_KV: return "kv";
    case LOOM_PLUGIN_KIND_QUANTIZER: return "quantizer";
    case LOOM_PLUGIN_KIND_SAMPLER: return "sampler";
    case LOOM_PLUGIN_KIND_DRAFTER: return "drafter";
    default: return "unknown(" + std::to_string(kind) + ")";
  }
}

std::optional<loom_plugin_kind> plugin_kind_from_name(const std::string& name) {
  if (name == "backend") return LOOM_PLUGIN_KIND_BACKEND;
  if (name == "kv") return LOOM_PLUGIN_KIND_KV;
  if (name == "quantizer") return LOOM_PLUGIN_KIND_QUANTIZER;
  if (name == "sampler") return LOOM_PLUGIN_KIND_SAMPLER;
  if (name == "drafter") return LOOM_PLUGIN_KIND_DRAFTER;
  return std::nullopt;
}

}  // namespace loom
