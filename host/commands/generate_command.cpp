// `loom generate [PROMPT]`: continue a prompt with the default (or given) model, streaming the text,
// then print TTFT and prefill/decode speeds to stderr.
#include <cstdio>
#include <iostream>
#include <string>

#include "command.h"
#include "host_options.h"
#include "model/generation.h"

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
    "  --no-echo          do not print the prompt before the continuation\n"
    "  --config FILE      loom.toml to read\n";

struct GenerateArgs {
  std::string prompt = kDefaultPrompt;
  std::string model;
  int64_t max_tokens = 128;
  std::optional<double> temp, top_p;
  std::optional<int64_t> seed, top_k, threads, n_ctx;
  std::string backend;
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

void print_stats(const GenerationStats& s, const LoadedModel& loaded) {
  const double prefill_tps = s.prefill_seconds > 0 ? static_cast<double>(s.n_prompt) / s.prefill_seconds : 0.0;
  const double decode_tps = s.decode_seconds > 0 ? static_cast<double>(s.n_decode) / s.decode_seconds : 0.0;
  std::fprintf(stderr,
               "\n\n[%s on %s] load %.2f s | prompt %lld tokens, TTFT %.1f ms, prefill %.1f tok/s | generated %lld "
               "tokens, decode %.1f tok/s%s\n",
               loaded.path.filename().string().c_str(), loaded.backend->caps().device_name, loaded.load_seconds,
               static_cast<long long>(s.n_prompt), s.ttft_seconds * 1e3, prefill_tps,
               static_cast<long long>(s.n_generated), decode_tps, s.stopped ? " (stopped at end of generation)" : "");
}

int run_generate(const CommandArgs& args) {
  HostOptions options;
  GenerateArgs g;
  bool have_prompt = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
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
  if (g.max_tokens < 1) throw std::runtime_error("--max-tokens must be >= 1");
  if (g.threads && *g.threads < 1) throw std::runtime_error("--threads must be >= 1");
  if (g.n_ctx && *g.n_ctx < 1) throw std::runtime_error("--n-ctx must be >= 1");

  Config config = options.load_config();
  if (!g.model.empty()) config.model.path = g.model;
  if (!g.backend.empty()) config.backend.name = g.backend;
  if (g.threads) config.backend.threads = *g.threads;
  if (g.n_ctx) config.model.n_ctx = *g.n_ctx;

  LoadedModel loaded = load_model(config);
  TokenSampler sampler(config, g.seed.value_or(config.sampler.seed));
  if (g.temp) sampler.params().temperature = static_cast<float>(*g.temp);
  if (g.top_k) sampler.params().top_k = static_cast<int32_t>(*g.top_k);
  if (g.top_p) sampler.params().top_p = static_cast<float>(*g.top_p);
  sampler.validate();

  const std::vector<int32_t> prompt = loaded.tokenizer->encode(g.prompt, true, true);
  if (prompt.empty()) throw std::runtime_error("the prompt encodes to no tokens");
  SessionOptions session_options;
  // Only as much KV as this run can use.
  session_options.n_ctx = std::min<int64_t>(loaded.model->n_ctx(), static_cast<int64_t>(prompt.size()) + g.max_tokens);
  Session session(*loaded.model, session_options);

  if (g.echo) {
    std::cout << g.prompt << std::flush;
  }
  const GenerationStats stats =
      generate_tokens(session, sampler, *loaded.tokenizer, prompt, g.max_tokens,
                      [](const std::string& text) { std::cout << text << std::flush; });
  std::cout << std::flush;
  print_stats(stats, loaded);
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("generate", "continue a prompt with a model (default: the installed Gemma 3 270M)", run_generate);

}  // namespace loom::host
