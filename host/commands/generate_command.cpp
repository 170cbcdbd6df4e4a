// `loom generate [PROMPT]`: continue a prompt with the default (or given) model, streaming the text,
// then print TTFT and prefill/decode speeds to stderr.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "command.h"
#include "engine/engine.h"
#include "host_options.h"
#include "model/default_model.h"
#include "tokenizer/tokenizer.h"
#include "progress_bar.h"

namespace loom::host {

namespace {

constexpr const char* kDefaultPrompt = "The capital of France is";

const char* kUsage =
    "usage: loom generate [PROMPT] [options]\n"
    "\n"
    "Continues PROMPT (default: \"The capital of France is\") and streams the text to stdout; timings go\n"
    "to stderr. With no --model it runs the default model (scripts/setup.sh installs it).\n"
    "\n"
    "options:\n"
    "  --model FILE       GGUF model (default: [model] path, $LOOM_MODEL, the installed default model)\n"
    "  --max-tokens N     tokens to generate (default 128)\n"
    "  --temp T           temperature; 0 = greedy (default: [sampler] temperature)\n"
    "  --seed S           random seed (default: [sampler] seed; -1 = random)\n"
    "  --top-k K          keep the K most likely tokens (0 = off)\n"
    "  --top-p P          keep the smallest set with probability >= P (1 = off)\n"
    "  --backend NAME     backend plugin (default: [backend] name, cpu)\n"
    "  --threads N        backend threads (default: [backend] threads, all cores)\n"
    "  --n-ctx N          context size (default: the model's)\n"
    "  --lora NAME=PATH[:SCALE]  load a LoRA adapter (llama.cpp's GGUF adapter format), scaled (default 1)\n"
    "  --adapter NAME     generate through this adapter ([[lora]] or --lora; default: the base model)\n"
    "  --no-echo          do not print the prompt before the continuation\n"
    "  --config FILE      loom.toml to read\n"
    "  --                 end of options: what follows is the PROMPT, even if it starts with '-'\n";

struct GenerateArgs {
  std::string prompt = kDefaultPrompt;
  std::string model;
  int64_t max_tokens = 128;
  std::optional<double> temp, top_p;
  std::optional<int64_t> seed, top_k, threads, n_ctx;
  std::string backend;
  std::string adapter;
  bool echo = true;
};

double parse_double(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs a number, got '" + value + "'");
}

int64_t parse_int(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs an integer, got '" + value + "'");
}

// What the request's events tell about its speed.
struct GenerateTimings {
  Clock::time_point submitted, first_token, last_token;
  uint32_t n_prompt = 0, n_generated = 0, n_cached = 0;
  FinishReason finish = FinishReason::none;
  std::string error;
};

void print_stats(const GenerateTimings& t, const Engine& engine, double load_seconds) {
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const double ttft = seconds(t.submitted, t.first_token);
  const double decode = seconds(t.first_token, t.last_token);
  const double prefill_tps = ttft > 0 ? (t.n_prompt - t.n_cached) / ttft : 0.0;
  const double decode_tps = decode > 0 && t.n_generated > 1 ? (t.n_generated - 1) / decode : 0.0;
  std::fprintf(stderr,
               "\n\n[%s on %s] load %.2f s | prompt %u tokens, TTFT %.1f ms, prefill %.1f tok/s | generated %u "
               "tokens, decode %.1f tok/s | finish: %s\n",
               std::filesystem::path(engine.info().model_path).filename().string().c_str(),
               engine.info().device_name.c_str(), load_seconds, t.n_prompt, ttft * 1e3, prefill_tps, t.n_generated,
               decode_tps, finish_reason_name(t.finish));
}

int run_generate(const CommandArgs& args) {
  HostOptions options;
  GenerateArgs g;
  bool have_prompt = false;
  std::vector<std::string> after_options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (end_of_options(args, i, after_options)) break;
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (options.parse(args, i)) {
    } else if (a == "--model" || a == "-m") {
      g.model = value();
    } else if (a == "--max-tokens" || a == "-n") {
      g.max_tokens = parse_int(a, value());
    } else if (a == "--temp") {
      g.temp = parse_double(a, value());
    } else if (a == "--seed") {
      g.seed = parse_int(a, value());
    } else if (a == "--top-k") {
      g.top_k = parse_int(a, value());
    } else if (a == "--top-p") {
      g.top_p = parse_double(a, value());
    } else if (a == "--backend") {
      g.backend = value();
    } else if (a == "--threads" || a == "-t") {
      g.threads = parse_int(a, value());
    } else if (a == "--n-ctx") {
      g.n_ctx = parse_int(a, value());
    } else if (a == "--adapter") {
      g.adapter = value();
    } else if (a == "--no-echo") {
      g.echo = false;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      std::cerr << "loom generate: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else if (!have_prompt) {
      g.prompt = a;
      have_prompt = true;
    } else {
      std::cerr << "loom generate: more than one prompt given ('" << a << "'); quote the prompt\n";
      return 2;
    }
  }
  for (const std::string& a : after_options) {
    if (have_prompt) {
      std::cerr << "loom generate: more than one prompt given ('" << a << "'); quote the prompt\n";
      return 2;
    }
    g.prompt = a;
    have_prompt = true;
  }
  if (g.max_tokens < 1) throw std::runtime_error("--max-tokens must be >= 1");
  if (g.threads && *g.threads < 1) throw std::runtime_error("--threads must be >= 1");
  if (g.n_ctx && *g.n_ctx < 1) throw std::runtime_error("--n-ctx must be >= 1");

  Config config = options.load_config();
  if (!g.model.empty()) config.model.path = g.model;
  if (!g.backend.empty()) config.backend.name = g.backend;
  if (g.threads) config.backend.threads = *g.threads;
  if (g.n_ctx) config.model.n_ctx = *g.n_ctx;

  const std::filesystem::path model_path =
      config.model.path.empty() ? default_model_path() : std::filesystem::path(config.model.path);
  std::fprintf(stderr, "loading %s...\n", model_path.string().c_str());
  const auto load_start = Clock::now();
  ProgressBar load_bar("loading model", "MiB", 1 << 20);
  Engine engine(config, model_path, [&load_bar](uint64_t done, uint64_t total) { load_bar.update(done, total); });
  load_bar.finish();
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
  const EngineInfo& info = engine.info();
  std::fprintf(stderr, "%s on %s: KV cache %llu tokens (%u blocks of %u, %.1f MiB), context %lld\n",
               info.model_name.c_str(), info.device_name.c_str(), static_cast<unsigned long long>(info.kv_capacity_tokens),
               info.kv_blocks, info.kv_block_size, static_cast<double>(info.kv_bytes) / (1 << 20),
               static_cast<long long>(info.n_ctx));

  Request request;
  request.prompt = engine.tokenizer().encode(g.prompt, true, true);
  request.max_tokens = static_cast<uint32_t>(g.max_tokens);
  request.lora = g.adapter;
  request.sampling.params = engine.default_sampling();
  if (g.temp) request.sampling.params.temperature = static_cast<float>(*g.temp);
  if (g.top_k) request.sampling.params.top_k = static_cast<int32_t>(*g.top_k);
  if (g.top_p) request.sampling.params.top_p = static_cast<float>(*g.top_p);
  const int64_t seed = g.seed.value_or(config.sampler.seed);
  if (seed >= 0) request.sampling.seed = static_cast<uint64_t>(seed);

  GenerateTimings timings;
  request.on_event = [&](const RequestEvent& e) {
    const auto now = Clock::now();
    if (!e.tokens.empty()) {
      if (timings.n_generated == 0) timings.first_token = now;
      timings.last_token = now;
      timings.n_generated += static_cast<uint32_t>(e.tokens.size());
    }
    std::cout << e.text << std::flush;
    if (e.finish != FinishReason::none) {
      timings.finish = e.finish;
      timings.error = e.error;
      timings.n_cached = e.n_cached_tokens;
    }
  };
  timings.n_prompt = static_cast<uint32_t>(request.prompt.size());
  if (g.echo) std::cout << g.prompt << std::flush;
  timings.submitted = Clock::now();
  engine.submit(std::move(request));  // loom::Error with the reason if it can never run
  while (engine.n_unfinished() > 0) engine.step();
  if (timings.finish == FinishReason::error) throw std::runtime_error(timings.error);
  print_stats(timings, engine, load_seconds);
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("generate", "continue a prompt with a model (default: the installed Gemma 3 270M)", run_generate);

}  // namespace loom::host
