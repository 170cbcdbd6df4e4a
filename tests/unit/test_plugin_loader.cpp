#include <catch2/catch.hpp>

#include "common/error.h"
#include "plugin/host_services.h"
#include "plugin/plugin_registry.h"
#include "plugin/table_validation.h"
#include "test_paths.h"

using loom::PluginLoader;

namespace {

std::string load_error(const std::filesystem::path& path) {
  try {
    if (path.extension() == ".toml") {
      PluginLoader::load_manifest(path);
    } else {
      PluginLoader::load_library(path);
    }
  } catch (const loom::Error& e) {
    return e.what();
  }
  return "";
}

const loom::PluginLoadError* error_for(const loom::PluginDiscovery& found, const std::string& file) {
  for (const auto& e : found.errors) {
    if (e.file.filename() == file) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a valid plugin loads and its table works", "[loader]") {
  auto plugin = PluginLoader::load_manifest(loom::test::test_plugin_dir() / "tp_good.toml");
  REQUIRE(plugin->kind() == LOOM_PLUGIN_KIND_SAMPLER);
  REQUIRE(plugin->name() == "tp_good");
  REQUIRE(plugin->sampler() != nullptr);
  REQUIRE(plugin->backend() == nullptr);
  loom_sampler_t* sampler = nullptr;
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  REQUIRE(plugin->sampler()->create(loom::default_host_services(), "{}", &sampler, error, sizeof(error)) ==
          LOOM_STATUS_OK);
  float logits[4] = {0.1f, 3.0f, -1.0f, 2.0f};
  loom_sample_row row{};
  row.struct_size = sizeof(row);
  row.logits = logits;
  REQUIRE(plugin->sampler()->sample(sampler, &row, 1, 4) == LOOM_STATUS_OK);
  CHECK(row.token == 1);
  plugin->sampler()->destroy(sampler);
}

TEST_CASE("a plugin speaking another ABI major is refused with both versions named", "[loader]") {
  auto message = load_error(loom::test::test_plugin_dir() / "libtp_wrong_major.so");
  CHECK_THAT(message, Catch::Contains("libtp_wrong_major.so"));
  CHECK_THAT(message, Catch::Contains("refused this host's ABI " + std::to_string(LOOM_ABI_MAJOR) + "." +
                                      std::to_string(LOOM_ABI_MINOR)));
  CHECK_THAT(message, Catch::Contains("speaks ABI " + std::to_string(LOOM_ABI_MAJOR + 1) + "." +
                                      std::to_string(LOOM_ABI_MINOR)));  // tp_wrong_major: the next major
}

TEST_CASE("a library without the entry symbol is named as not a Loom plugin", "[loader]") {
  auto message = load_error(loom::test::test_plugin_dir() / "libtp_no_entry.so");
  CHECK_THAT(message, Catch::Contains("libtp_no_entry.so"));
  CHECK_THAT(message, Catch::Contains("does not export 'loom_plugin_query'"));
}

TEST_CASE("a table smaller than ABI 1.0 and a missing mandatory slot are refused", "[loader]") {
  CHECK_THAT(load_error(loom::test::test_plugin_dir() / "libtp_small_table.so"),
             Catch::Contains("loom_sampler_i struct_size is 16 bytes"));
  CHECK_THAT(load_error(loom::test::test_plugin_dir() / "libtp_null_mandatory.so"),
             Catch::Contains("has no 'sample' slot"));
}

TEST_CASE("a newer-minor plugin with a larger table is accepted", "[loader]") {
  auto plugin = PluginLoader::load_library(loom::test::test_plugin_dir() / "libtp_big_table.so");
  CHECK(plugin->desc().abi_minor == LOOM_ABI_MINOR + 5);
  CHECK(plugin->sampler()->struct_size > sizeof(loom_sampler_i));
}

TEST_CASE("bad manifests name the file and the problem", "[loader]") {
  auto dir = loom::test::test_plugin_dir();
  auto truncated = load_error(dir / "truncated.toml");
  CHECK_THAT(truncated, Catch::Contains("truncated.toml:2"));
  CHECK_THAT(truncated, Catch::Contains("bad plugin manifest"));
  auto missing = load_error(dir / "missing_library.toml");
  CHECK_THAT(missing, Catch::Contains("libdoes_not_exist.so"));
  CHECK_THAT(missing, Catch::Contains("does not exist"));
  CHECK_THAT(load_error(dir / "wrong_kind.toml"), Catch::Contains("manifest says kind 'backend'"));
  CHECK_THAT(load_error(dir / "nowhere.so"), Catch::Contains("plugin library not found"));
}

TEST_CASE("discovery reports every broken plugin and still loads the good ones", "[loader]") {
  auto found = loom::discover_plugins({loom::test::test_plugin_dir()});
  std::vector<std::string> names;
  for (const auto& p : found.plugins) names.push_back(p->name());
  CHECK(std::find(names.begin(), names.end(), "tp_good") != names.end());
  CHECK(std::find(names.begin(), names.end(), "tp_big_table") != names.end());
  CHECK(names.size() == 3);
  for (const char* file : {"tp_wrong_major.toml", "tp_no_entry.toml", "tp_small_table.toml",
                           "tp_null_mandatory.toml", "truncated.toml", "missing_library.toml", "wrong_kind.toml"}) {
    INFO(file);
    const auto* error = error_for(found, file);
    REQUIRE(error != nullptr);
    CHECK(!error->reason.empty());
  }
  // tp_fails_init loads: failing to *initialise* is found when it is created, not at discovery.
  REQUIRE(found.find(LOOM_PLUGIN_KIND_SAMPLER, "tp_fails_init") != nullptr);
}

TEST_CASE("a plugin that fails to initialise reports why and leaves the others usable", "[loader]") {
  auto failing = PluginLoader::load_manifest(loom::test::test_plugin_dir() / "tp_fails_init.toml");
  auto good = PluginLoader::load_manifest(loom::test::test_plugin_dir() / "tp_good.toml");
  loom_sampler_t* sampler = nullptr;
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  CHECK(failing->sampler()->create(loom::default_host_services(), "{}", &sampler, error, sizeof(error)) !=
        LOOM_STATUS_OK);
  CHECK_THAT(std::string(error), Catch::Contains("deliberate initialisation failure"));
  REQUIRE(good->sampler()->create(loom::default_host_services(), "{}", &sampler, error, sizeof(error)) ==
          LOOM_STATUS_OK);
  good->sampler()->destroy(sampler);
}

TEST_CASE("LOOM_PLUGIN_PATH extends the search path after the configured folders", "[loader]") {
  setenv("LOOM_PLUGIN_PATH", "/opt/a:/opt/b", 1);
  auto path = loom::plugin_search_path({"/etc/loom"});
  unsetenv("LOOM_PLUGIN_PATH");
  REQUIRE(path.size() >= 3);
  CHECK(path[0] == "/etc/loom");
  CHECK(path[1] == "/opt/a");
  CHECK(path[2] == "/opt/b");
}

namespace {
loom_status kv_stub_create(const loom_host_services*, const char*, loom_kv_t**, char*, uint32_t) { return LOOM_STATUS_OK; }
void kv_stub_destroy(loom_kv_t*) {}
const char* kv_stub_last_error(loom_kv_t*) { return ""; }
loom_status kv_stub_stats(loom_kv_t*, loom_kv_stats*) { return LOOM_STATUS_OK; }
loom_status kv_stub_create_seq(loom_kv_t*, uint64_t, const int32_t*, uint32_t, uint32_t*) { return LOOM_STATUS_OK; }
loom_status kv_stub_append(loom_kv_t*, uint64_t, const int32_t*, uint32_t) { return LOOM_STATUS_OK; }
loom_status kv_stub_free(loom_kv_t*, uint64_t) { return LOOM_STATUS_OK; }
loom_status kv_stub_table(loom_kv_t*, uint64_t, int32_t*, uint32_t, uint32_t*) { return LOOM_STATUS_OK; }
}  // namespace

TEST_CASE("a KV allocator table from before ABI 1.4 (no set_event_sink) still validates", "[loader]") {
  loom_kv_i table{};
  table.create = kv_stub_create;
  table.destroy = kv_stub_destroy;
  table.last_error = kv_stub_last_error;
  table.get_stats = kv_stub_stats;
  table.seq_create = kv_stub_create_seq;
  table.seq_append = kv_stub_append;
  table.seq_free = kv_stub_free;
  table.seq_block_table = kv_stub_table;
  // The 1.0-1.3 table ends just before the 1.4 slot: accepted, and the slot reads as absent.
  table.struct_size = static_cast<uint32_t>(offsetof(loom_kv_i, set_event_sink));
  CHECK_FALSE(loom::validate_plugin_table(LOOM_PLUGIN_KIND_KV, &table).has_value());
  CHECK(LOOM_SLOT(&table, loom_kv_i, set_event_sink) == nullptr);
  // A 1.4/1.5 table ends before the 1.6 state-slot functions: accepted, and they read as absent (the
  // engine then refuses only hybrid models, whose recurrent layers need them).
  table.struct_size = static_cast<uint32_t>(offsetof(loom_kv_i, seq_state_slot));
  CHECK_FALSE(loom::validate_plugin_table(LOOM_PLUGIN_KIND_KV, &table).has_value());
  CHECK(LOOM_SLOT(&table, loom_kv_i, seq_state_slot) == nullptr);
  CHECK(LOOM_SLOT(&table, loom_kv_i, take_pending_state_copies) == nullptr);
  // A 1.6 table ends before seq_checkpoint_state: accepted, and it reads as absent (the engine then
  // runs hybrid models without prefix reuse).
  table.struct_size = static_cast<uint32_t>(offsetof(loom_kv_i, seq_checkpoint_state));
  CHECK_FALSE(loom::validate_plugin_table(LOOM_PLUGIN_KIND_KV, &table).has_value());
  CHECK(LOOM_SLOT(&table, loom_kv_i, seq_checkpoint_state) == nullptr);
  table.struct_size = static_cast<uint32_t>(offsetof(loom_kv_i, set_event_sink));
  // Smaller than the 1.0 table is refused with the sizes named.
  table.struct_size -= 8;
  const auto error = loom::validate_plugin_table(LOOM_PLUGIN_KIND_KV, &table);
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Contains("loom_kv_i struct_size is") && Catch::Contains("bytes of ABI 1.0"));
}

namespace {
loom_status be_count(uint32_t* n, char*, uint32_t) { return *n = 0, LOOM_STATUS_OK; }
loom_status be_create(const loom_host_services*, const char*, loom_backend_t**, char*, uint32_t) { return LOOM_STATUS_UNSUPPORTED; }
void be_destroy(loom_backend_t*) {}
const char* be_last_error(loom_backend_t*) { return ""; }
loom_status be_caps(loom_backend_t*, loom_backend_caps*) { return LOOM_STATUS_OK; }
loom_status be_buffer_create(loom_backend_t*, uint64_t, loom_buffer_usage, loom_buffer_t**) { return LOOM_STATUS_OK; }
void be_buffer_destroy(loom_backend_t*, loom_buffer_t*) {}
loom_status be_sync(loom_backend_t*, loom_stream_t*) { return LOOM_STATUS_OK; }
loom_status be_to_device(loom_backend_t*, loom_stream_t*, loom_buffer_t*, uint64_t, const void*, uint64_t) { return LOOM_STATUS_OK; }
loom_status be_to_host(loom_backend_t*, loom_stream_t*, void*, loom_buffer_t*, uint64_t, uint64_t) { return LOOM_STATUS_OK; }
loom_status be_run(loom_backend_t*, loom_stream_t*, const loom_op*, uint32_t) { return LOOM_STATUS_OK; }
}  // namespace

TEST_CASE("a backend table from before ABI 1.5 (no get_stats) still validates", "[loader]") {
  loom_backend_i table{};
  table.device_count = be_count;
  table.create = be_create;
  table.destroy = be_destroy;
  table.last_error = be_last_error;
  table.get_caps = be_caps;
  table.buffer_create = be_buffer_create;
  table.buffer_destroy = be_buffer_destroy;
  table.stream_synchronize = be_sync;
  table.copy_to_device = be_to_device;
  table.copy_to_host = be_to_host;
  table.run_ops = be_run;
  // The 1.0-1.4 table ends just before the 1.5 slot: accepted, and the slot reads as absent.
  table.struct_size = static_cast<uint32_t>(offsetof(loom_backend_i, get_stats));
  CHECK_FALSE(loom::validate_plugin_table(LOOM_PLUGIN_KIND_BACKEND, &table).has_value());
  CHECK(LOOM_SLOT(&table, loom_backend_i, get_stats) == nullptr);
  table.struct_size -= 8;
  const auto error = loom::validate_plugin_table(LOOM_PLUGIN_KIND_BACKEND, &table);
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Contains("loom_backend_i struct_size is") && Catch::Contains("bytes of ABI 1.0"));
}
