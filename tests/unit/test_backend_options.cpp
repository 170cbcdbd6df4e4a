// [backend.options] from loom.toml to the plugin: backend_config_json merges the options with [backend]
// device/threads, the real CPU plugin acts on them, and a value the plugin refuses reaches the user of
// `loom generate` as a clear error rather than a crash.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "common/error.h"
#include "config/config.h"
#include "gguf/synth_model.h"
#include "test_paths.h"

namespace {

loom::Config config_with_plugins(const std::string& toml_text) {
  loom::Config config = loom::parse_config(toml_text, "options.toml");
  config.plugins.search_path = {loom::test::plugin_build_dir().string()};
  return config;
}

// The CPU plugin's description of the instance the options produced, e.g. "CPU (scalar, 2 threads)".
std::string cpu_device_name(const loom::Config& config) {
  auto backend = loom::Backend::create(loom::find_backend_plugin(config, "cpu"), loom::backend_config_json(config));
  return backend->caps().device_name;
}

struct CommandResult {
  int exit_code = -1;
  bool killed_by_signal = false;
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> chunk{};
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), pipe)) result.output.append(chunk.data(), n);
  const int status = ::pclose(pipe);
  result.killed_by_signal = WIFSIGNALED(status);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace

TEST_CASE("backend_config_json carries every option with its JSON type beside device and threads",
          "[backend_options]") {
  auto config = loom::parse_config(R"(
[backend]
device = 1
threads = 3
[backend.options]
simd = "scalar"
reference = true
tile_rows = 64
scale = 0.25
)",
                                   "options.toml");
  const auto json = nlohmann::json::parse(loom::backend_config_json(config));
  CHECK(json.size() == 6u);
  CHECK(json.at("device") == 1);
  CHECK(json.at("threads") == 3);
  CHECK(json.at("simd") == "scalar");
  CHECK(json.at("reference").is_boolean());
  CHECK(json.at("reference") == true);
  CHECK(json.at("tile_rows").is_number_integer());
  CHECK(json.at("tile_rows") == 64);
  CHECK(json.at("scale").is_number_float());
  CHECK(json.at("scale") == 0.25);

  // --threads on the command line still replaces [backend] threads, and options do not disturb it.
  CHECK(nlohmann::json::parse(loom::backend_config_json(config, 7)).at("threads") == 7);
  // Without options the object is what it always was.
  CHECK(nlohmann::json::parse(loom::backend_config_json(loom::Config{})) == nlohmann::json{{"device", 0}});
}

TEST_CASE("backend_config_json refuses device or threads among the options of a Config built in code",
          "[backend_options]") {
  loom::Config config;
  config.backend.options["threads"] = int64_t{8};
  try {
    (void)loom::backend_config_json(config);
    FAIL("an option named threads was accepted");
  } catch (const loom::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("backend.threads in [backend]"));
  }
}

TEST_CASE("the CPU plugin acts on [backend.options] from loom.toml", "[backend_options]") {
  CHECK_THAT(cpu_device_name(config_with_plugins("[backend]\nthreads = 2\n[backend.options]\nsimd = \"scalar\"\n")),
             Catch::Equals("CPU (scalar, 2 threads)"));
  CHECK_THAT(cpu_device_name(config_with_plugins("[backend.options]\nreference = true\n")),
             Catch::StartsWith("CPU reference"));
  try {
    (void)cpu_device_name(config_with_plugins("[backend.options]\nsimd = \"bogus\"\n"));
    FAIL("the CPU plugin accepted simd = \"bogus\"");
  } catch (const loom::Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("backend 'cpu'"));
    CHECK_THAT(message, Catch::Contains("\"simd\" must be \"auto\", \"avx512\", \"avx2\" or \"scalar\""));
    CHECK_THAT(message, Catch::Contains("\"bogus\""));
  }
}

TEST_CASE("loom generate reports a plugin option the plugin refuses, without crashing", "[backend_options]") {
  const auto dir = loom::test::scratch_dir("backend-options-cli");
  loom::gguf::SynthSpec spec;
  spec.arch = "llama";
  spec.n_layers = 1;
  spec.dim = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.ff_dim = 128;
  spec.n_vocab = 512;
  spec.n_ctx = 64;
  spec.seed = 5;
  loom::gguf::write_synthetic_model(spec, dir / "tiny.gguf");
  {
    std::ofstream toml(dir / "loom.toml");
    toml << "[backend]\nthreads = 1\n[backend.options]\nsimd = \"bogus\"\n[plugins]\nsearch_path = [\""
         << loom::test::plugin_build_dir().string() << "\"]\n";
  }
  const auto result = run_command(loom::test::loom_binary().string() + " generate --backend cpu --max-tokens 1 --model '" +
                                  (dir / "tiny.gguf").string() + "' --config '" + (dir / "loom.toml").string() + "'");
  INFO(result.output);
  CHECK_FALSE(result.killed_by_signal);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.output, Catch::Contains("backend 'cpu'"));
  CHECK_THAT(result.output, Catch::Contains("\"simd\" must be"));
  CHECK_THAT(result.output, Catch::Contains("\"bogus\""));
}
