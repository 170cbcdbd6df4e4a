#include "config/config_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <type_traits>

#include "common/error.h"

namespace loom {

namespace {

// toml++ as built by Debian has no value_exact<std::string>; read strings through as_string().
std::optional<std::string> string_of(const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  return std::nullopt;
}

// Accessors into Config, so one spec both stores and renders a field.
#define LOOM_FIELD(section, member) [](Config& c) -> auto& { return c.section.member; }

std::string toml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {  // TOML basic strings forbid raw controls
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04X", static_cast<unsigned>(static_cast<unsigned char>(ch)));
      out += escaped;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A key as TOML writes it: bare when it can be, quoted otherwise (option names are free-form).
std::string toml_key(const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
  return bare ? key : toml_quoted(key);
}

// The shortest text that reads back as the same double, kept a TOML float ("1.0", not "1") so that a
// printed configuration passes the same value type to the plugin.
std::string toml_float(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  std::string out(text, result.ptr);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

template <class Access>
KeySpec integer_key(std::string section, std::string key, Access access, int64_t lo, int64_t hi,
                    bool power_of_two = false) {
  std::string allowed = "an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                        (power_of_two ? ", a power of two" : "");
  return {section, key, allowed,
          [=](Config& c, const toml::node& node) -> std::string {
            auto v = node.value_exact<int64_t>();
            if (!v) return "must be " + allowed;
            if (*v < lo || *v > hi || (power_of_two && (*v & (*v - 1)) != 0)) {
              return "value " + std::to_string(*v) + " is out of range (allowed: " + allowed + ")";
            }
            access(c) = *v;
            return "";
          },
          [=](const Config& c) { return std::to_string(access(const_cast<Config&>(c))); }};
}

template <class Access>
KeySpec number_key(std::string section, std::string key, Access access, double lo, double hi) {
  std::ostringstream range;
  range << "a number in [" << lo << ", " << hi << "]";
  std::string allowed = range.str();
  return {section, key, allowed,
          [=](Config& c, const toml::node& node) -> std::string {
            auto v = node.value<double>();  // integers are accepted where numbers are asked
            if (!v || !(node.is_floating_point() || node.is_integer())) return "must be " + allowed;
            if (!std::isfinite(*v) || *v < lo || *v > hi) {
              std::ostringstream msg;
              msg << "value " << *v << " is out of range (allowed: " << allowed << ")";
              return msg.str();
            }
            access(c) = *v;
            return "";
          },
          [=](const Config& c) {
            std::ostringstream out;
            out << access(const_cast<Config&>(c));
            return out.str();
          }};
}

template <class Access>
KeySpec bool_key(std::string section, std::string key, Access access) {
  return {section, key, "true or false",
          [=](Config& c, const toml::node& node) -> std::string {
            auto v = node.value_exact<bool>();
            if (!v) return "must be true or false";
            access(c) = *v;
            return "";
          },
          [=](const Config& c) { return std::string(access(const_cast<Config&>(c)) ? "true" : "false"); }};
}

// A string, optionally one of `choices`.
template <class Access>
KeySpec string_key(std::string section, std::string key, Access access, std::vector<std::string> choices = {}) {
  // An empty choice (the default "as the file says") reads as "" in the message.
  std::vector<std::string> shown;
  for (const std::string& choice : choices) shown.push_back(choice.empty() ? "\"\"" : choice);
  std::string allowed = choices.empty() ? "a string" : "one of " + join(shown, ", ");
  return {section, key, allowed,
          [=](Config& c, const toml::node& node) -> std::string {
            auto v = string_of(node);
            if (!v) return "must be " + allowed;
            if (!choices.empty() && std::find(choices.begin(), choices.end(), *v) == choices.end()) {
              return "value \"" + *v + "\" is not allowed (allowed: " + allowed + ")";
            }
            access(c) = *v;
            return "";
          },
          [=](const Config& c) { return toml_quoted(access(const_cast<Config&>(c))); }};
}

template <class Access>
KeySpec string_list_key(std::string section, std::string key, Access access, std::vector<std::string> choices = {}) {
  std::string allowed = choices.empty() ? "an array of strings" : "an array of: " + join(choices, ", ");
  return {section, key, allowed,
          [=](Config& c, const toml::node& node) -> std::string {
            const auto* array = node.as_array();
            if (array == nullptr) return "must be " + allowed;
            std::vector<std::string> values;
            for (const auto& item : *array) {
              auto v = string_of(item);
              if (!v) return "must be " + allowed;
              if (!choices.empty() && std::find(choices.begin(), choices.end(), *v) == choices.end()) {
                return "element \"" + *v + "\" is not allowed (allowed: " + allowed + ")";
              }
              values.push_back(*v);
            }
            access(c) = values;
            return "";
          },
          [=](const Config& c) {
            std::vector<std::string> items;
            for (const auto& s : access(const_cast<Config&>(c))) items.push_back(toml_quoted(s));
            return "[" + join(items, ", ") + "]";
          }};
}

template <class Access>
KeySpec byte_size_key(std::string section, std::string key, Access access, bool zero_is_none = false) {
  std::string allowed = std::string("a size such as \"512MiB\", \"2GiB\" or a number of bytes (>= 1MiB") +
                        (zero_is_none ? "; 0 = no limit)" : ")");
  return {section, key, allowed,
          [=](Config& c, const toml::node& node) -> std::string {
            int64_t bytes = 0;
            if (auto i = node.value_exact<int64_t>()) {
              bytes = *i;
            } else if (auto s = string_of(node)) {
              try {
                bytes = parse_byte_size(*s);
              } catch (const Error& e) {
                return e.what();
              }
            } else {
              return "must be " + allowed;
            }
            if (bytes < (1 << 20) && !(zero_is_none && bytes == 0)) return "value " + std::to_string(bytes) + " bytes is too small (allowed: " + allowed + ")";
            access(c) = bytes;
            return "";
          },
          [=](const Config& c) { return std::to_string(access(const_cast<Config&>(c))); }};
}

// [backend.options]: free-form plugin keys whose scalar values travel to the plugin's create() unchanged.
KeySpec backend_options_key() {
  std::string allowed = "a table of plugin options, each a string, integer, float or boolean";
  KeySpec spec{"backend", "options", allowed, nullptr, nullptr};
  spec.assign_entry = [](Config& c, const std::string& entry, const toml::node& node) -> std::string {
    if (is_backend_key_option(entry)) {
      return "'" + entry + "' is a [backend] key: set backend." + entry + " in [backend], not in [backend.options]";
    }
    const char* scalar = "must be a string, integer, float or boolean";
    BackendOptionValue value;
    if (auto s = string_of(node)) {
      value = *s;
    } else if (const auto* i = node.as_integer()) {
      value = i->get();
    } else if (const auto* f = node.as_floating_point()) {
      if (!std::isfinite(f->get())) return std::string(scalar) + " (a finite float; JSON has no inf or nan)";
      value = f->get();
    } else if (const auto* b = node.as_boolean()) {
      value = b->get();
    } else if (node.is_table()) {
      return std::string(scalar) + ", not a table (plugin options are flat)";
    } else if (node.is_array()) {
      return std::string(scalar) + ", not an array (plugin options are flat)";
    } else {
      return std::string(scalar) + ", not a date or time";
    }
    c.backend.options[entry] = std::move(value);
    return "";
  };
  spec.render = [](const Config& c) {
    std::vector<std::string> items;
    for (const auto& [entry, value] : c.backend.options) {
      const std::string text = std::visit(
          [](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) return toml_quoted(v);
            else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
            else if constexpr (std::is_same_v<T, double>) return toml_float(v);
            else return std::to_string(v);
          },
          value);
      items.push_back(toml_key(entry) + " = " + text);
    }
    return items.empty() ? std::string("{}") : "{ " + join(items, ", ") + " }";
  };
  return spec;
}

std::vector<KeySpec> build_schema() {
  const std::vector<std::string> stages = {"penalties", "logit_bias", "top_k", "top_p", "min_p", "typical_p",
                                           "temperature", "top_n_sigma", "xtc", "dry"};
  return {
      string_key("model", "path", LOOM_FIELD(model, path)),
      integer_key("model", "n_ctx", LOOM_FIELD(model, n_ctx), 0, 1 << 20),
      string_key("model", "chat_template", LOOM_FIELD(model, chat_template)),
      string_key("model", "mmproj", LOOM_FIELD(model, mmproj)),
      string_key("model", "pooling", LOOM_FIELD(model, pooling), {"", "mean", "cls", "last"}),
      integer_key("model", "max_loras", LOOM_FIELD(model, max_loras), 0, 256),
      integer_key("model", "max_lora_rank", LOOM_FIELD(model, max_lora_rank), 0, 4096),

      string_key("backend", "name", LOOM_FIELD(backend, name)),
      integer_key("backend", "device", LOOM_FIELD(backend, device), 0, 255),
      integer_key("backend", "threads", LOOM_FIELD(backend, threads), 0, 1024),
      backend_options_key(),

      string_key("kv", "allocator", LOOM_FIELD(kv, allocator)),
      integer_key("kv", "block_size", LOOM_FIELD(kv, block_size), 1, 1024, true),
      byte_size_key("kv", "memory", LOOM_FIELD(kv, memory_bytes)),
      number_key("kv", "memory_fraction", LOOM_FIELD(kv, memory_fraction), 0.0, 0.99),
      string_key("kv", "dtype", LOOM_FIELD(kv, dtype), {"f32", "f16", "int8", "q8_0", "q4_0", "fp8_e4m3", "fp8"}),
      bool_key("kv", "prefix_caching", LOOM_FIELD(kv, prefix_caching)),
      integer_key("kv", "state_checkpoints", LOOM_FIELD(kv, state_checkpoints), 0, 4096),
      string_key("kv", "sliding_layers", LOOM_FIELD(kv, sliding_layers), {"auto", "window", "full"}),
      integer_key("kv", "window_seqs", LOOM_FIELD(kv, window_seqs), 0, 4096),
      integer_key("kv", "window_chunk_tokens", LOOM_FIELD(kv, window_chunk_tokens), 2, 1 << 16),
      string_key("kv", "disk_cache_path", LOOM_FIELD(kv, disk_cache_path)),
      byte_size_key("kv", "disk_cache_bytes", LOOM_FIELD(kv, disk_cache_bytes)),

      integer_key("scheduler", "max_num_seqs", LOOM_FIELD(scheduler, max_num_seqs), 1, 4096),
      integer_key("scheduler", "max_batched_tokens", LOOM_FIELD(scheduler, max_batched_tokens), 1, 1 << 20),
      bool_key("scheduler", "chunked_prefill", LOOM_FIELD(scheduler, chunked_prefill)),
      integer_key("scheduler", "prefill_tokens_while_decoding", LOOM_FIELD(scheduler, prefill_tokens_while_decoding), 0, 1 << 20),
      string_key("scheduler", "policy", LOOM_FIELD(scheduler, policy), {"fcfs", "priority"}),

      bool_key("engine", "deterministic", LOOM_FIELD(engine, deterministic)),

      string_key("sampler", "plugin", LOOM_FIELD(sampler, plugin)),
      string_list_key("sampler", "chain", LOOM_FIELD(sampler, chain), stages),
      number_key("sampler", "temperature", LOOM_FIELD(sampler, temperature), 0.0, 100.0),
      integer_key("sampler", "top_k", LOOM_FIELD(sampler, top_k), 0, 1 << 24),
      number_key("sampler", "top_p", LOOM_FIELD(sampler, top_p), 1e-6, 1.0),
      number_key("sampler", "min_p", LOOM_FIELD(sampler, min_p), 0.0, 1.0),
      number_key("sampler", "typical_p", LOOM_FIELD(sampler, typical_p), 1e-6, 1.0),
      number_key("sampler", "repetition_penalty", LOOM_FIELD(sampler, repetition_penalty), 1e-3, 100.0),
      number_key("sampler", "frequency_penalty", LOOM_FIELD(sampler, frequency_penalty), -2.0, 2.0),
      number_key("sampler", "presence_penalty", LOOM_FIELD(sampler, presence_penalty), -2.0, 2.0),
      integer_key("sampler", "penalty_last_n", LOOM_FIELD(sampler, penalty_last_n), -1, 1 << 20),
      integer_key("sampler", "seed", LOOM_FIELD(sampler, seed), -1, INT64_MAX),

      string_key("drafter", "kind", LOOM_FIELD(drafter, kind), {"none", "ngram", "draft_model"}),
      integer_key("drafter", "k", LOOM_FIELD(drafter, k), 1, 16),
      string_key("drafter", "model", LOOM_FIELD(drafter, model)),
      integer_key("drafter", "ngram_max", LOOM_FIELD(drafter, ngram_max), 1, 8),

      string_key("quant", "plugin", LOOM_FIELD(quant, plugin)),

      string_key("server", "host", LOOM_FIELD(server, host)),
      integer_key("server", "port", LOOM_FIELD(server, port), 1, 65535),
      string_key("server", "api_key", LOOM_FIELD(server, api_key)),
      integer_key("server", "max_queue", LOOM_FIELD(server, max_queue), 1, 1 << 20),
      integer_key("server", "max_body_bytes", LOOM_FIELD(server, max_body_bytes), 1024, 1ll << 30),
      string_key("server", "model_name", LOOM_FIELD(server, model_name)),
      string_list_key("server", "model_aliases", LOOM_FIELD(server, model_aliases)),
      bool_key("server", "enable_lora_loading", LOOM_FIELD(server, enable_lora_loading)),
      integer_key("server", "max_embedding_inputs", LOOM_FIELD(server, max_embedding_inputs), 1, 1 << 20),
      integer_key("server", "max_images_per_request", LOOM_FIELD(server, max_images_per_request), 0, 1024),
      integer_key("server", "max_image_bytes", LOOM_FIELD(server, max_image_bytes), 1024, 1ll << 30),
      integer_key("server", "max_image_pixels", LOOM_FIELD(server, max_image_pixels), 1, 1ll << 32),
      string_key("server", "allowed_local_media_path", LOOM_FIELD(server, allowed_local_media_path)),
      integer_key("server", "max_connections", LOOM_FIELD(server, max_connections), 1, 1 << 20),
      number_key("server", "keep_alive_timeout", LOOM_FIELD(server, keep_alive_timeout), 0.01, 3600.0),
      integer_key("server", "keep_alive_max_requests", LOOM_FIELD(server, keep_alive_max_requests), 1, 1 << 30),
      number_key("server", "request_read_timeout", LOOM_FIELD(server, request_read_timeout), 0.01, 3600.0),
      byte_size_key("server", "memory_budget", LOOM_FIELD(server, memory_budget), true),
      number_key("server", "idle_unload", LOOM_FIELD(server, idle_unload), 0.0, 1e7),
      number_key("server", "model_swap_wait", LOOM_FIELD(server, model_swap_wait), 0.0, 3600.0),

      bool_key("server.kv_events", "enabled", LOOM_FIELD(server, kv_events.enabled)),
      string_key("server.kv_events", "endpoint", LOOM_FIELD(server, kv_events.endpoint)),
      string_key("server.kv_events", "mode", LOOM_FIELD(server, kv_events.mode), {"auto", "bind", "connect"}),
      string_key("server.kv_events", "replay_endpoint", LOOM_FIELD(server, kv_events.replay_endpoint)),
      string_key("server.kv_events", "topic", LOOM_FIELD(server, kv_events.topic)),
      integer_key("server.kv_events", "buffer_steps", LOOM_FIELD(server, kv_events.buffer_steps), 1, 1 << 24),

      string_list_key("plugins", "search_path", LOOM_FIELD(plugins, search_path)),
  };
}

}  // namespace

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

}  // namespace loom
