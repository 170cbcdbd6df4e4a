#include "plugin/table_validation.h"

#include <cstddef>
#include <type_traits>
#include <vector>

namespace loom {

namespace {

struct SlotCheck {
  const char* name;
  bool present;
};

// The size of each table at ABI 1.0: every 1.x plugin's table is at least this big. Members
// appended later are read only when the plugin's struct_size covers them (LOOM_HAS_MEMBER).
template <class Table>
constexpr size_t abi_1_0_size() {
  if constexpr (std::is_same_v<Table, loom_kv_i>) return offsetof(loom_kv_i, set_event_sink);
  if constexpr (std::is_same_v<Table, loom_backend_i>) return offsetof(loom_backend_i, get_stats);  // ABI 1.5
  return sizeof(Table);
}

template <class Table>
std::optional<std::string> check_table(const void* raw, const char* table_name, std::vector<SlotCheck> (*slots)(const Table&)) {
  const auto* table = static_cast<const Table*>(raw);
  // A newer plugin's larger table is fine: we read only the members we know.
  if (table->struct_size < abi_1_0_size<Table>()) {
    return std::string(table_name) + " struct_size is " + std::to_string(table->struct_size) +
           " bytes, smaller than the " + std::to_string(abi_1_0_size<Table>()) + " bytes of ABI 1.0";
  }
  for (const auto& slot : slots(*table)) {
    if (!slot.present) return std::string(table_name) + " has no '" + slot.name + "' slot, which is mandatory";
  }
  return std::nullopt;
}

std::vector<SlotCheck> backend_slots(const loom_backend_i& t) {
  return {{"device_count", t.device_count != nullptr}, {"create", t.create != nullptr},
          {"destroy", t.destroy != nullptr},           {"last_error", t.last_error != nullptr},
          {"get_caps", t.get_caps != nullptr},         {"buffer_create", t.buffer_create != nullptr},
          {"buffer_destroy", t.buffer_destroy != nullptr}, {"stream_synchronize", t.stream_synchronize != nullptr},
          {"copy_to_device", t.copy_to_device != nullptr}, {"copy_to_host", t.copy_to_host != nullptr},
          {"run_ops", t.run_ops != nullptr}};
}

std::vector<SlotCheck> kv_slots(const loom_kv_i& t) {
  return {{"create", t.create != nullptr},         {"destroy", t.destroy != nullptr},
          {"last_error", t.last_error != nullptr}, {"get_stats", t.get_stats != nullptr},
          {"seq_create", t.seq_create != nullptr}, {"seq_append", t.seq_append != nullptr},
          {"seq_free", t.seq_free != nullptr},     {"seq_block_table", t.seq_block_table != nullptr}};
}

std::vector<SlotCheck> quantizer_slots(const loom_quantizer_i& t) {
  return {{"create", t.create != nullptr},         {"destroy", t.destroy != nullptr},
          {"last_error", t.last_error != nullptr}, {"format_count", t.format_count != nullptr},
          {"format_get", t.format_get != nullptr}, {"row_size", t.row_size != nullptr}};
}

std::vector<SlotCheck> sampler_slots(const loom_sampler_i& t) {
  return {{"create", t.create != nullptr},
          {"destroy", t.destroy != nullptr},
          {"last_error", t.last_error != nullptr},
          {"state_create", t.state_create != nullptr},
          {"state_destroy", t.state_destroy != nullptr},
          {"sample", t.sample != nullptr}};
}

std::vector<SlotCheck> drafter_slots(const loom_drafter_i& t) {
  return {{"create", t.create != nullptr},
          {"destroy", t.destroy != nullptr},
          {"last_error", t.last_error != nullptr},
          {"propose", t.propose != nullptr}};
}

}  // namespace

std::optional<std::string> validate_plugin_table(loom_plugin_kind kind, const void* table) {
  if (table == nullptr) return std::string("the descriptor's function table is NULL");
  switch (kind) {
    case LOOM_PLUGIN_KIND_BACKEND: return check_table<loom_backend_i>(table, "loom_backend_i", backend_slots);
    case LOOM_PLUGIN_KIND_KV: return check_table<loom_kv_i>(table, "loom_kv_i", kv_slots);
    case LOOM_PLUGIN_KIND_QUANTIZER: return check_table<loom_quantizer_i>(table, "loom_quantizer_i", quantizer_slots);
    case LOOM_PLUGIN_KIND_SAMPLER: return check_table<loom_sampler_i>(table, "loom_sampler_i", sampler_slots);
    case LOOM_PLUGIN_KIND_DRAFTER: return check_table<loom_drafter_i>(table, "loom_drafter_i", drafter_slots);
    default: return "unknown plugin kind " + std::to_string(kind);
  }
}

}  // namespace loom
