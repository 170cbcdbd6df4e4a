// ABI-edge cases that apply to every plugin kind: version negotiation, descriptor sanity, create /
// destroy, malformed configuration, error-buffer bounds, older and newer host-services tables, and a
// host whose allocator fails.
#include <cstring>
#include <vector>

#include "conformance_case.h"

namespace loom::conformance {

namespace {

// create/destroy/last_error of any kind, behind one face.
struct Lifecycle {
  std::function<loom_status(const loom_host_services*, const char*, void**, char*, uint32_t)> create;
  std::function<void(void*)> destroy;
};

template <class Table, class Handle>
Lifecycle lifecycle_of(const Table* table) {
  return {[table](const loom_host_services* host, const char* config, void** out, char* error, uint32_t size) {
            Handle* handle = nullptr;
            loom_status status = table->create(host, config, &handle, error, size);
            *out = handle;
            return status;
          },
          [table](void* handle) { table->destroy(static_cast<Handle*>(handle)); }};
}

Lifecycle lifecycle(const LoadedPlugin& plugin) {
  if (auto t = plugin.backend()) return lifecycle_of<loom_backend_i, loom_backend_t>(t);
  if (auto t = plugin.kv()) return lifecycle_of<loom_kv_i, loom_kv_t>(t);
  if (auto t = plugin.quantizer()) return lifecycle_of<loom_quantizer_i, loom_quantizer_t>(t);
  if (auto t = plugin.sampler()) return lifecycle_of<loom_sampler_i, loom_sampler_t>(t);
  if (auto t = plugin.drafter()) return lifecycle_of<loom_drafter_i, loom_drafter_t>(t);
  throw CaseFailure("plugin has an unknown kind");
}

// A backend with no usable device cannot be created; that is "not supported here", not a failure.
void require_device(const CaseContext& context) {
  const auto* backend = context.plugin->backend();
  if (backend == nullptr) return;
  uint32_t n = 0;
  char reason[256] = {};
  loom_status status = backend->device_count(&n, reason, sizeof(reason));
  if (status != LOOM_STATUS_OK || n == 0) not_supported(std::string("no device: ") + reason);
}

// Create with these host services and config, expect success, destroy.
void create_and_destroy(const CaseContext& context, const loom_host_services* host, const std::string& what) {
  auto life = lifecycle(*context.plugin);
  void* handle = nullptr;
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  loom_status status = life.create(host, context.plugin_config_json.c_str(), &handle, error, sizeof(error));
  // UNSUPPORTED: the plugin needs something this host does not offer (a device, model services).
  if (status == LOOM_STATUS_UNSUPPORTED) not_supported(std::string("create: ") + error);
  require(status == LOOM_STATUS_OK, what + ": create failed with status " + std::to_string(status) + ": " + error);
  require(handle != nullptr, what + ": create returned OK but no handle");
  life.destroy(handle);
}

void* failing_alloc(void*, uint64_t, uint64_t) { return nullptr; }

std::vector<Case> build() {
  std::vector<Case> cases;
  cases.push_back({"abi.descriptor", 0, [](CaseContext& c) {
                     const auto& d = c.plugin->desc();
                     require(d.abi_major == LOOM_ABI_MAJOR, "descriptor abi_major is " + std::to_string(d.abi_major));
                     require(d.name != nullptr && std::strlen(d.name) > 0, "descriptor has no name");
                     require(d.version != nullptr && std::strlen(d.version) > 0, "descriptor has no version");
                     require(d.description != nullptr, "descriptor has no description");
                     require(d.table != nullptr, "descriptor has no table");
                     require(*static_cast<const uint32_t*>(d.table) >= 8, "table struct_size is implausible");
                   }});
  cases.push_back({"abi.refuses_other_major", 0, [](CaseContext& c) {
                     const loom_plugin_desc* desc = nullptr;
                     loom_status status = c.plugin->query_as(LOOM_ABI_MAJOR + 1, 0, &desc);
                     require(status == LOOM_STATUS_VERSION_MISMATCH,
                             "a host speaking ABI " + std::to_string(LOOM_ABI_MAJOR + 1) +
                                 ".0 was not refused (status " + std::to_string(status) + ")");
                     status = c.plugin->query_as(0, 9, &desc);
                     require(status == LOOM_STATUS_VERSION_MISMATCH, "a host speaking ABI 0.9 was not refused");
                   }});
  cases.push_back({"abi.accepts_newer_minor", 0, [](CaseContext& c) {
                     const loom_plugin_desc* desc = nullptr;
                     loom_status status = c.plugin->query_as(LOOM_ABI_MAJOR, LOOM_ABI_MINOR + 7, &desc);
                     require(status == LOOM_STATUS_OK, "a host with a newer minor ABI was refused (status " +
                                                           std::to_string(status) + ")");
                     require(desc != nullptr && desc->abi_major == LOOM_ABI_MAJOR,
                             "descriptor for a newer-minor host has the wrong major");
                   }});
  cases.push_back({"abi.create_destroy", 0, [](CaseContext& c) {
                     require_device(c);
                     create_and_destroy(c, c.host, "with the host's services");
                   }});
  cases.push_back({"abi.rejects_malformed_config", 0, [](CaseContext& c) {
                     require_device(c);
                     auto life = lifecycle(*c.plugin);
                     void* handle = nullptr;
                     char error[LOOM_ERROR_BUFFER_SIZE];
                     std::memset(error, 0x7f, sizeof(error));
                     loom_status status = life.create(c.host, "{\"unterminated", &handle, error, sizeof(error));
                     if (status == LOOM_STATUS_OK) {
                       life.destroy(handle);
                       throw CaseFailure("create accepted malformed JSON configuration");
                     }
                     require(std::memchr(error, '\0', sizeof(error)) != nullptr, "error message is not terminated");
                     require(std::strlen(error) > 0, "create failed without an error message");
                   }});
  cases.push_back({"abi.error_buffer_bounds", 0, [](CaseContext& c) {
                     require_device(c);
                     auto life = lifecycle(*c.plugin);
                     void* handle = nullptr;
                     // 8 usable bytes then a guard: a plugin must truncate its message, not overrun.
                     char buffer[8 + 32];
                     std::memset(buffer, 0x5a, sizeof(buffer));
                     loom_status status = life.create(c.host, "[1,2", &handle, buffer, 8);
                     if (status == LOOM_STATUS_OK) life.destroy(handle);
                     require(status != LOOM_STATUS_OK, "create accepted malformed JSON configuration");
                     require(std::memchr(buffer, '\0', 8) != nullptr, "truncated message is not terminated");
                     for (size_t i = 8; i < sizeof(buffer); ++i) {
                       require(buffer[i] == 0x5a, "create wrote past the error buffer's size");
                     }
                   }});
  cases.push_back({"abi.older_host_services", 0, [](CaseContext& c) {
                     require_device(c);
                     // A 1.0 host that offers no model services: the table ends before model_open.
                     loom_host_services older = *c.host;
                     older.struct_size = static_cast<uint32_t>(offsetof(loom_host_services, model_open));
                     create_and_destroy(c, &older, "with a host-services table ending before model_open");
                   }});
  cases.push_back({"abi.newer_host_services", 0, [](CaseContext& c) {
                     require_device(c);
                     // A newer host appends members; the plugin must read only what it knows.
                     struct Newer {
                       loom_host_services base;
                       void* future_slots[8];
                     } newer{};
                     newer.base = *c.host;
                     newer.base.struct_size = sizeof(Newer);
                     newer.base.abi_minor = LOOM_ABI_MINOR + 3;
                     create_and_destroy(c, &newer.base, "with a larger host-services table");
                   }});
  cases.push_back({"abi.host_allocation_failure", 0, [](CaseContext& c) {
                     require_device(c);
                     loom_host_services failing = *c.host;
                     failing.alloc = failing_alloc;
                     auto life = lifecycle(*c.plugin);
                     void* handle = nullptr;
                     char error[LOOM_ERROR_BUFFER_SIZE] = {};
                     loom_status status = life.create(&failing, c.plugin_config_json.c_str(), &handle, error, sizeof(error));
                     // Either the plugin does not need host memory to start, or it fails cleanly.
                     if (status == LOOM_STATUS_UNSUPPORTED) not_supported(std::string("create: ") + error);
                     if (status == LOOM_STATUS_OK) {
                       require(handle != nullptr, "create returned OK but no handle");
                       life.destroy(handle);
                     } else {
                       require(status == LOOM_STATUS_OUT_OF_MEMORY,
                               "allocation failure reported as status " + std::to_string(status));
                       require(std::strlen(error) > 0, "allocation failure without a message");
                     }
                   }});
  return cases;
}

}  // namespace

std::vector<Case> abi_cases() { return build(); }

}  // namespace loom::conformance
