// [[models]]: the models one server serves, each loaded when a request first names it. An entry
// names its file and may set what differs from the shared [model], [kv] and [backend] sections.
#include <sstream>

#include "config/config_errors.h"

namespace loom {

namespace {

constexpr const char* kModelKeys = "name, path, aliases, n_ctx, kv_memory, backend, threads, chat_template, preload";

// One key of one entry; returns the problem ("" when fine).
std::string assign_model_key(ModelEntrySettings& entry, const std::string& key, const toml::node& value) {
  if (key == "name" || key == "path" || key == "backend" || key == "chat_template") {
    const auto* text = value.as_string();
    if (text == nullptr || text->get().empty()) return "must be a non-empty string";
    (key == "name" ? entry.name : key == "path" ? entry.path : key == "backend" ? entry.backend : entry.chat_template) = text->get();
  } else if (key == "aliases") {
    const auto* array = value.as_array();
    if (array == nullptr) return "must be an array of strings";
    for (const toml::node& item : *array) {
      const auto* text = item.as_string();
      if (text == nullptr || text->get().empty()) return "must be an array of non-empty strings";
      entry.aliases.push_back(text->get());
    }
  } else if (key == "n_ctx" || key == "threads") {
    const auto* number = value.as_integer();
    const int64_t limit = key == "n_ctx" ? (1 << 20) : 1024;
    if (number == nullptr || number->get() < 0 || number->get() > limit)
      return "must be an integer from 0 to " + std::to_string(limit);
    (key == "n_ctx" ? entry.n_ctx : entry.threads) = number->get();
  } else if (key == "kv_memory") {
    int64_t bytes = 0;
    if (const auto* number = value.as_integer()) {
      bytes = number->get();
    } else if (const auto* text = value.as_string()) {
      try {
        bytes = parse_byte_size(text->get());
      } catch (const Error& e) {
        return e.what();
      }
    } else {
      return "must be a size such as \"256MiB\" or a number of bytes";
    }
    if (bytes < (1 << 20)) return "must be at least 1MiB";
    entry.kv_memory_bytes = bytes;
  } else if (key == "preload") {
    const auto* flag = value.as_boolean();
    if (flag == nullptr) return "must be true or false";
    entry.preload = flag->get();
  } else {
    return std::string("unknown key (keys of [[models]]: ") + kModelKeys + ")";
  }
  return "";
}

std::string quoted(const std::string& text) {
  std::string q = "\"";
  for (char ch : text) q += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
  return q + "\"";
}

}  // namespace

void apply_model_entries(Config& config, const std::filesystem::path& file, const toml::node& node, ConfigErrors& errors) {
  const auto* array = node.as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    errors.add(node, location(file, node) + ": 'models' must be an array of tables ([[models]] with name and path)");
    return;
  }
  for (const toml::node& item : *array) {
    ModelEntrySettings entry;
    bool ok = true;
    for (const auto& [key_view, value] : *item.as_table()) {
      const std::string key(key_view.str());
      if (std::string problem = assign_model_key(entry, key, value); !problem.empty()) {
        errors.add(value, location(file, value) + ": key 'models." + key + "': " + problem);
        ok = false;
      }
    }
    if (ok && (entry.name.empty() || entry.path.empty())) {
      errors.add(item, location(file, item) + ": a [[models]] entry needs a name and a path");
      ok = false;
    }
    // Every name a request may use must pick one model.
    std::vector<std::string> names = entry.aliases;
    names.push_back(entry.name);
    for (const ModelEntrySettings& other : config.models) {
      for (const std::string& name : names) {
        const bool taken = other.name == name || std::find(other.aliases.begin(), other.aliases.end(), name) != other.aliases.end();
        if (ok && taken) {
          errors.add(item, location(file, item) + ": [[models]] name '" + name + "' is already a name of the model '" + other.name + "'");
          ok = false;
        }
      }
    }
    if (ok) config.models.push_back(std::move(entry));
  }
}

std::string model_entries_to_toml(const std::vector<ModelEntrySettings>& models) {
  std::ostringstream out;
  for (const ModelEntrySettings& m : models) {
    out << "\n[[models]]\nname = " << quoted(m.name) << "\npath = " << quoted(m.path) << "\n";
    if (!m.aliases.empty()) {
      out << "aliases = [";
      for (size_t i = 0; i < m.aliases.size(); ++i) out << (i ? ", " : "") << quoted(m.aliases[i]);
      out << "]\n";
    }
    if (m.n_ctx >= 0) out << "n_ctx = " << m.n_ctx << "\n";
    if (m.kv_memory_bytes > 0) out << "kv_memory = " << m.kv_memory_bytes << "\n";
    if (!m.backend.empty()) out << "backend = " << quoted(m.backend) << "\n";
    if (m.threads >= 0) out << "threads = " << m.threads << "\n";
    if (!m.chat_template.empty()) out << "chat_template = " << quoted(m.chat_template) << "\n";
    out << "preload = " << (m.preload ? "true" : "false") << "\n";
  }
  return out.str();
}

}  // namespace loom
