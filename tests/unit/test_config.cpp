#include <algorithm>

#include <catch2/catch.hpp>

#include "common/error.h"
#include "config/config.h"
#include "test_paths.h"

namespace {

std::string config_error(const std::string& text) {
  try {
    loom::parse_config(text, "test.toml");
  } catch (const loom::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a full configuration parses into typed settings", "[config]") {
  auto config = loom::parse_config(R"(
[model]
path = "m.gguf"
[backend]
name = "vulkan"
threads = 2
[kv]
block_size = 32
memory = "256MiB"
dtype = "int8"
prefix_caching = false
[scheduler]
max_num_seqs = 8
[sampler]
chain = ["top_k", "temperature"]
temperature = 0
top_p = 0.9
[drafter]
kind = "ngram"
k = 5
[server]
port = 9000
[plugins]
search_path = ["/opt/loom"]
)",
                                   "full.toml");
  CHECK(config.model.path == "m.gguf");
  CHECK(config.backend.name == "vulkan");
  CHECK(config.backend.threads == 2);
  CHECK(config.kv.block_size == 32);
  CHECK(config.kv.memory_bytes == 256ll << 20);
  CHECK(config.kv.dtype == "int8");
  CHECK_FALSE(config.kv.prefix_caching);
  CHECK(config.scheduler.max_num_seqs == 8);
  CHECK(config.sampler.chain == std::vector<std::string>{"top_k", "temperature"});
  CHECK(config.sampler.temperature == 0.0);  // an integer is accepted where a number is asked
  CHECK(config.sampler.top_p == Approx(0.9));
  CHECK(config.drafter.kind == "ngram");
  CHECK(config.drafter.k == 5);
  CHECK(config.server.port == 9000);
  CHECK(config.plugins.search_path == std::vector<std::string>{"/opt/loom"});
}

TEST_CASE("malformed TOML names the file and line", "[config]") {
  auto message = config_error("[model]\npath = \"unterminated\n");
  CHECK_THAT(message, Catch::Contains("test.toml:2"));
  CHECK_THAT(message, Catch::Contains("invalid TOML"));
}

TEST_CASE("unknown sections and keys are errors listing what exists", "[config]") {
  auto section = config_error("[modle]\npath = \"x\"\n");
  CHECK_THAT(section, Catch::Contains("test.toml:1"));
  CHECK_THAT(section, Catch::Contains("unknown section 'modle'"));
  CHECK_THAT(section, Catch::Contains("model"));
  auto key = config_error("[kv]\nblock_size = 16\nblocksize = 16\n");
  CHECK_THAT(key, Catch::Contains("test.toml:3"));
  CHECK_THAT(key, Catch::Contains("unknown key 'kv.blocksize'"));
  CHECK_THAT(key, Catch::Contains("block_size"));
}

TEST_CASE("every error of a configuration is reported in one run, each with its file, line and key", "[config]") {
  const std::string message = config_error(
      "[server]\nport = \"eighty\"\n"    // line 2: wrong type
      "[kv]\nblock_size = 24\n"            // line 4: out of range
      "blocksize = 16\n"                  // line 5: unknown key
      "[modle]\npath = \"x\"\n"            // line 6: unknown section
      "[backend.options]\nsimd = [1]\n");  // line 9: a free-form entry of the wrong kind
  CHECK_THAT(message, Catch::StartsWith("5 errors in the configuration:"));
  CHECK_THAT(message, Catch::Contains("test.toml:2: key 'server.port'"));
  CHECK_THAT(message, Catch::Contains("test.toml:4: key 'kv.block_size'"));
  CHECK_THAT(message, Catch::Contains("test.toml:5: unknown key 'kv.blocksize'"));
  CHECK_THAT(message, Catch::Contains("test.toml:6: unknown section 'modle'"));
  CHECK_THAT(message, Catch::Contains("test.toml:9: key 'backend.options.simd'"));
  // In file order, one per line.
  CHECK(message.find("test.toml:2") < message.find("test.toml:4"));
  CHECK(std::count(message.begin(), message.end(), '\n') == 5);
  // A single error keeps its one-line form.
  CHECK(config_error("[server]\nport = 0\n").find('\n') == std::string::npos);
}

TEST_CASE("wrong types name the key and the expected type", "[config]") {
  auto message = config_error("[server]\nport = \"eighty\"\n");
  CHECK_THAT(message, Catch::Contains("test.toml:2"));
  CHECK_THAT(message, Catch::Contains("'server.port'"));
  CHECK_THAT(message, Catch::Contains("must be an integer in 1..65535"));
  CHECK_THAT(config_error("[kv]\nprefix_caching = 1\n"), Catch::Contains("must be true or false"));
  CHECK_THAT(config_error("[sampler]\nchain = \"top_k\"\n"), Catch::Contains("must be an array of"));
  CHECK_THAT(config_error("kv = 3\n"), Catch::Contains("'kv' must be a table"));
}

TEST_CASE("out-of-range values name the key, the value and the range", "[config]") {
  auto port = config_error("[server]\nport = 70000\n");
  CHECK_THAT(port, Catch::Contains("'server.port'"));
  CHECK_THAT(port, Catch::Contains("value 70000 is out of range"));
  auto top_p = config_error("[sampler]\ntop_p = 1.5\n");
  CHECK_THAT(top_p, Catch::Contains("'sampler.top_p'"));
  CHECK_THAT(top_p, Catch::Contains("[1e-06, 1]"));
  CHECK_THAT(config_error("[kv]\nblock_size = 24\n"), Catch::Contains("a power of two"));
  auto dtype = config_error("[kv]\ndtype = \"int4\"\n");
  CHECK_THAT(dtype, Catch::Contains("\"int4\" is not allowed"));
  CHECK_THAT(dtype, Catch::Contains("f32, f16, int8"));
  CHECK_THAT(config_error("[sampler]\nchain = [\"top_q\"]\n"), Catch::Contains("\"top_q\" is not allowed"));
  CHECK_THAT(config_error("[kv]\nmemory = \"12 parsecs\"\n"), Catch::Contains("unknown unit"));
  CHECK_THAT(config_error("[kv]\nmemory = 1000\n"), Catch::Contains("too small"));
}

TEST_CASE("the resolved configuration round-trips through its own printout", "[config]") {
  auto config = loom::parse_config("[kv]\nblock_size = 64\n[sampler]\nchain = [\"min_p\"]\n", "a.toml");
  auto printed = loom::config_to_toml(config);
  CHECK_THAT(printed, Catch::Contains("block_size = 64"));
  auto again = loom::parse_config(printed, "printed.toml");
  CHECK(again.kv.block_size == 64);
  CHECK(again.sampler.chain == std::vector<std::string>{"min_p"});
  auto body = [](const std::string& text) { return text.substr(text.find('\n')); };  // skip the source line
  CHECK(body(loom::config_to_toml(again)) == body(printed));
}

TEST_CASE("byte sizes accept binary and decimal units", "[config]") {
  CHECK(loom::parse_byte_size("512MiB") == 512ll << 20);
  CHECK(loom::parse_byte_size("2GB") == 2000000000ll);
  CHECK(loom::parse_byte_size("1.5GiB") == 1610612736ll);
  CHECK(loom::parse_byte_size("4096") == 4096);
  CHECK_THROWS_AS(loom::parse_byte_size("MiB"), loom::Error);
}

TEST_CASE("loom.example.toml is valid and holds the defaults", "[config]") {
  auto config = loom::load_config(loom::test::source_dir() / "loom.example.toml");
  auto defaults = loom::Config{};
  auto body = [](const std::string& text) { return text.substr(text.find('\n')); };
  CHECK(body(loom::config_to_toml(config)) == body(loom::config_to_toml(defaults)));
}

TEST_CASE("[backend.options] keeps each plugin option with its TOML type", "[config][backend_options]") {
  auto config = loom::parse_config(R"(
[backend]
name = "cpu"
threads = 2
[backend.options]
simd = "avx2"
reference = false
tile_rows = 64
scale = 0.5
whole = 3.0
"odd key" = "kept"
)",
                                   "options.toml");
  const auto& options = config.backend.options;
  REQUIRE(options.size() == 6);
  CHECK(std::get<std::string>(options.at("simd")) == "avx2");
  CHECK(std::get<bool>(options.at("reference")) == false);
  CHECK(std::get<int64_t>(options.at("tile_rows")) == 64);
  CHECK(std::get<double>(options.at("scale")) == 0.5);
  CHECK(std::get<double>(options.at("whole")) == 3.0);  // a float stays a float even when whole
  CHECK(std::get<std::string>(options.at("odd key")) == "kept");
  CHECK(config.backend.threads == 2);  // the [backend] keys beside the sub-table still apply

  auto inline_table = loom::parse_config("[backend]\noptions = { matvec = \"subgroup\" }\n", "inline.toml");
  CHECK(std::get<std::string>(inline_table.backend.options.at("matvec")) == "subgroup");
  CHECK(loom::Config{}.backend.options.empty());
}

TEST_CASE("[backend.options] rejects tables, arrays and other non-scalars, naming the key and line",
          "[config][backend_options]") {
  auto nested = config_error("[backend]\nname = \"cpu\"\n[backend.options]\nsimd = \"avx2\"\n[backend.options.tiles]\nrows = 4\n");
  CHECK_THAT(nested, Catch::Contains("test.toml:5"));
  CHECK_THAT(nested, Catch::Contains("'backend.options.tiles'"));
  CHECK_THAT(nested, Catch::Contains("not a table"));
  auto array = config_error("[backend.options]\nsimd = \"avx2\"\nlevels = [\"avx2\", \"scalar\"]\n");
  CHECK_THAT(array, Catch::Contains("test.toml:3"));
  CHECK_THAT(array, Catch::Contains("'backend.options.levels'"));
  CHECK_THAT(array, Catch::Contains("not an array"));
  auto inline_nested = config_error("[backend.options]\ntiles = { rows = 4 }\n");
  CHECK_THAT(inline_nested, Catch::Contains("'backend.options.tiles'"));
  CHECK_THAT(inline_nested, Catch::Contains("not a table"));
  CHECK_THAT(config_error("[backend.options]\nwhen = 1979-05-27\n"), Catch::Contains("not a date or time"));
  CHECK_THAT(config_error("[backend.options]\nscale = inf\n"), Catch::Contains("finite"));
  auto not_a_table = config_error("[backend]\noptions = \"simd=avx2\"\n");
  CHECK_THAT(not_a_table, Catch::Contains("test.toml:2"));
  CHECK_THAT(not_a_table, Catch::Contains("'backend.options'"));
  CHECK_THAT(not_a_table, Catch::Contains("must be a table"));
}

TEST_CASE("[backend.options] may not set device or threads, which belong to [backend]", "[config][backend_options]") {
  auto device = config_error("[backend]\ndevice = 0\n[backend.options]\ndevice = 1\n");
  CHECK_THAT(device, Catch::Contains("test.toml:4"));
  CHECK_THAT(device, Catch::Contains("'backend.options.device'"));
  CHECK_THAT(device, Catch::Contains("set backend.device in [backend]"));
  auto threads = config_error("[backend.options]\nthreads = 4\n");
  CHECK_THAT(threads, Catch::Contains("'backend.options.threads'"));
  CHECK_THAT(threads, Catch::Contains("set backend.threads in [backend]"));
  CHECK(loom::is_backend_key_option("device"));
  CHECK_FALSE(loom::is_backend_key_option("simd"));
}

TEST_CASE("[backend.options] round-trips through the printed configuration with its types",
          "[config][backend_options]") {
  auto config = loom::parse_config(
      "[backend.options]\nsimd = \"say \\\"hi\\\"\\n\"\nreference = true\nrows = -3\nwhole = 2.0\nsmall = 1e-9\n"
      "\"a.b\" = 1\n",
      "a.toml");
  auto printed = loom::config_to_toml(config);
  CHECK_THAT(printed, Catch::Contains("whole = 2.0"));
  CHECK_THAT(printed, Catch::Contains("\"a.b\" = 1"));
  auto again = loom::parse_config(printed, "printed.toml");
  CHECK(again.backend.options == config.backend.options);
  CHECK(std::get<double>(again.backend.options.at("whole")) == 2.0);
  CHECK(std::get<std::string>(again.backend.options.at("simd")) == "say \"hi\"\n");
  CHECK_THAT(loom::config_to_toml(loom::Config{}), Catch::Contains("options = {}"));
}

TEST_CASE("[[models]] entries parse with their optional keys and round-trip through the printout", "[config][models]") {
  const std::string text = R"(
[server]
memory_budget = "6GiB"
idle_unload = 300
[[models]]
name = "coder"
path = "q.gguf"
aliases = ["c", "code"]
preload = true
[[models]]
name = "gemma"
path = "g.gguf"
n_ctx = 8192
kv_memory = "256MiB"
backend = "vulkan"
threads = 4
chat_template = "chatml"
)";
  const loom::Config config = loom::parse_config(text, "models.toml");
  REQUIRE(config.models.size() == 2);
  CHECK(config.server.memory_budget == 6ll << 30);
  CHECK(config.server.idle_unload == 300.0);
  CHECK(config.models[0].aliases == std::vector<std::string>{"c", "code"});
  CHECK(config.models[0].preload);
  CHECK(config.models[0].n_ctx == -1);
  CHECK(config.models[1].n_ctx == 8192);
  CHECK(config.models[1].kv_memory_bytes == 256ll << 20);
  CHECK(config.models[1].backend == "vulkan");
  CHECK(config.models[1].threads == 4);
  CHECK(config.models[1].chat_template == "chatml");
  const loom::Config again = loom::parse_config(loom::config_to_toml(config), "printed.toml");
  REQUIRE(again.models.size() == 2);
  CHECK(again.models[1].kv_memory_bytes == config.models[1].kv_memory_bytes);
  CHECK(again.models[0].aliases == config.models[0].aliases);
}

TEST_CASE("bad [[models]] entries are refused naming the line and the key", "[config][models]") {
  CHECK_THAT(config_error("[[models]]\nname = \"a\"\n"), Catch::Contains("test.toml:1: a [[models]] entry needs a name and a path"));
  CHECK_THAT(config_error("[[models]]\nname = \"a\"\npath = \"a.gguf\"\nport = 3\n"),
             Catch::Contains("test.toml:4: key 'models.port': unknown key (keys of [[models]]: name, path, aliases"));
  CHECK_THAT(config_error("[[models]]\nname = \"a\"\npath = \"a.gguf\"\nkv_memory = \"12 parsecs\"\n"),
             Catch::Contains("key 'models.kv_memory'"));
  CHECK_THAT(config_error("[[models]]\nname = \"a\"\npath = \"a.gguf\"\n[[models]]\nname = \"b\"\npath = \"b.gguf\"\naliases = [\"a\"]\n"),
             Catch::Contains("test.toml:4: [[models]] name 'a' is already a name of the model 'a'"));
  CHECK_THAT(config_error("models = 3\n"), Catch::Contains("'models' must be an array of tables"));
  CHECK_THAT(config_error("[server]\nmemory_budget = 100\n"), Catch::Contains("key 'server.memory_budget'"));
}
