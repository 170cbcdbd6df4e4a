#include "config/config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "common/error.h"
#include "config/config_errors.h"
#include "config/config_schema.h"

namespace loom {

namespace {

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& spec : config_schema()) {
    if (std::find(names.begin(), names.end(), spec.section) == names.end()) names.push_back(spec.section);
  }
  return names;
}

std::string keys_of(const std::string& section) {
  std::string keys;
  for (const auto& spec : config_schema()) {
    if (spec.section == section) keys += (keys.empty() ? "" : ", ") + spec.key;
  }
  return keys;
}

const KeySpec* find_spec(const std::string& section, const std::string& key) {
  for (const auto& spec : config_schema()) {
    if (spec.section == section && spec.key == key) return &spec;
  }
  return nullptr;
}

// A table whose keys the schema does not list ([backend.options]): each entry is checked on its own, and an
// error points at that entry's line as 'backend.options.NAME'.
void apply_free_form_table(Config& config, const std::filesystem::path& file, const std::string& name,
                           const KeySpec& spec, const toml::node& node, ConfigErrors& errors) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    errors.add(node, location(file, node) + ": key '" + name + "': must be " + spec.allowed);
    return;
  }
  for (const auto& [entry_view, entry_node] : *table) {
    const std::string entry(entry_view.str());
    std::string problem = spec.assign_entry(config, entry, entry_node);
    if (!problem.empty()) errors.add(entry_node, location(file, entry_node) + ": key '" + name + "." + entry + "': " + problem);
  }
}

void apply_section(Config& config, const std::filesystem::path& file, const std::string& section,
                   const toml::table& table, ConfigErrors& errors) {
  const auto sections = section_names();
  for (const auto& [key_view, node] : table) {
    const std::string key(key_view.str());
    const std::string nested = section + "." + key;
    if (node.is_table() && std::find(sections.begin(), sections.end(), nested) != sections.end()) {
      apply_section(config, file, nested, *node.as_table(), errors);  // [server.kv_events]
      continue;
    }
    const KeySpec* spec = find_spec(section, key);
    if (spec == nullptr) {
      errors.add(node, location(file, node) + ": unknown key '" + section + "." + key + "' (keys of [" + section +
                       "]: " + keys_of(section) + ")");
      continue;
    }
    if (spec->assign_entry) {
      apply_free_form_table(config, file, section + "." + key, *spec, node, errors);
      continue;
    }
    std::string problem = spec->assign(config, node);
    if (!problem.empty()) errors.add(node, location(file, node) + ": key '" + section + "." + key + "': " + problem);
    else config.given.insert(section + "." + key);
  }
}

// [[lora]]: an array of tables of name, path and an optional scale; names unique and not empty.
void apply_loras(Config& config, const std::filesystem::path& file, const toml::node& node, ConfigErrors& errors) {
  const auto* array = node.as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    errors.add(node, location(file, node) + ": 'lora' must be an array of tables ([[lora]] with name, path and scale)");
    return;
  }
  for (const toml::node& entry : *array) {
    const toml::table& table = *entry.as_table();
    LoraSettings lora;
    bool ok = true;
    for (const auto& [key_view, value] : table) {
      const std::string key(key_view.str());
      if (key == "name" || key == "path") {
        const auto* text = value.as_string();
        if (text == nullptr || text->get().empty()) {
          errors.add(value, location(file, value) + ": key 'lora." + key + "': must be a non-empty string");
          ok = false;
        } else {
          (key == "name" ? lora.name : lora.path) = text->get();
        }
      } else if (key == "scale") {
        const std::optional<double> v = value.value<double>();
        if (!v || !(*v >= 0.0) || *v > 100.0) {
          errors.add(value, location(file, value) + ": key 'lora.scale': must be a number from 0 to 100");
          ok = false;
        } else {
          lora.scale = *v;
        }
      } else {
        errors.add(value, location(file, value) + ": unknown key 'lora." + key + "' (keys of [[lora]]: name, path, scale)");
        ok = false;
      }
    }
    if (ok && (lora.name.empty() || lora.path.empty())) {
      errors.add(entry, location(file, entry) + ": a [[lora]] entry needs a name and a path");
      ok = false;
    }
    for (const LoraSettings& other : config.loras) {
      if (ok && other.name == lora.name) {
        errors.add(entry, location(file, entry) + ": [[lora]] name '" + lora.name + "' is used twice");
        ok = false;
      }
    }
    if (ok) config.loras.push_back(std::move(lora));
  }
}

}  // namespace

bool is_backend_key_option(const std::string& option) { return option == "device" || option == "threads"; }

int64_t parse_byte_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw Error("size \"" + text + "\" does not start with a number");
  double number = 0;
  try {
    number = std::stod(text.substr(0, i));
  } catch (...) {
    throw Error("size \"" + text + "\" is not a number");
  }
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  static const std::pair<const char*, double> units[] = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
  for (const auto& [name, scale] : units) {
    if (unit == name) return static_cast<int64_t>(number * scale);
  }
  throw Error("size \"" + text + "\" has an unknown unit '" + unit + "' (use B, KiB, MiB, GiB, KB, MB, GB)");
}

Config parse_config(const std::string& toml_text, const std::filesystem::path& label) {
  toml::table root;
  try {
    root = toml::parse(toml_text, label.string());
  } catch (const toml::parse_error& e) {
    throw Error(label.string() + ":" + std::to_string(e.source().begin.line) + ": invalid TOML: " +
                std::string(e.description()));
  }
  Config config;
  config.source = label;
  const auto sections = section_names();
  ConfigErrors errors;
  for (const auto& [name_view, node] : root) {
    const std::string name(name_view.str());
    if (name == "lora") {
      apply_loras(config, label, node, errors);
      continue;
    }
    if (name == "models") {
      apply_model_entries(config, label, node, errors);
      continue;
    }
    // Nested sections ([server.kv_events]) are reached through their parent table.
    if (name.find('.') != std::string::npos || std::find(sections.begin(), sections.end(), name) == sections.end()) {
      std::string all;
      for (const auto& s : sections) all += (all.empty() ? "" : ", ") + s;
      errors.add(node, location(label, node) + ": unknown section '" + name + "' (sections: " + all + ")");
      continue;
    }
    const auto* table = node.as_table();
    if (table == nullptr) {
      errors.add(node, location(label, node) + ": '" + name + "' must be a table ([" + name + "])");
      continue;
    }
    apply_section(config, label, name, *table, errors);
  }
  if (!errors.empty()) errors.raise();
  return config;
}

Config load_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the configuration file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_config(buffer.str(), path);
}

std::string config_to_toml(const Config& config) {
  std::ostringstream out;
  out << "# resolved configuration" << (config.source.empty() ? " (defaults)" : " of " + config.source.string())
      << "\n";
  std::string section;
  for (const auto& spec : config_schema()) {
    if (spec.section != section) {
      section = spec.section;
      out << "\n[" << section << "]\n";
    }
    out << spec.key << " = " << spec.render(config) << "\n";
  }
  const auto quoted = [](const std::string& text) {
    std::string q = "\"";
    for (char ch : text) q += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    return q + "\"";
  };
  for (const LoraSettings& lora : config.loras)
    out << "\n[[lora]]\nname = " << quoted(lora.name) << "\npath = " << quoted(lora.path) << "\nscale = " << lora.scale << "\n";
  out << model_entries_to_toml(config.models);
  return out.str();
}

}  // namespace loom
