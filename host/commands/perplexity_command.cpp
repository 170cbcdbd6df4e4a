// `loom perplexity --model M --text FILE`: perplexity of a model over a text file, with running values
// per window and the final value with its standard error. Windowing is documented in
// core/src/eval/perplexity.h (llama.cpp's by default, Hugging Face's strided with --stride).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "command.h"
#include "eval/perplexity.h"
#include "gguf/dtype_traits.h"
#include "host_options.h"
#include "model/loaded_model.h"
#include "progress_bar.h"

namespace loom::host {

namespace {

const char* kUsage =
    "usage: loom perplexity --text FILE [options]\n"
    "\n"
    "Perplexity of the model over FILE. Default (llama.cpp's scheme): disjoint windows of --ctx tokens,\n"
    "each from an empty cache starting with BOS, scoring the second half of each window. With --stride S:\n"
    "Hugging Face's scheme, windows of --ctx tokens every S tokens, each token scored once.\n"
    "\n"
    "options:\n"
    "  --model FILE       GGUF model (default: [model] path, $LOOM_MODEL, the installed default model)\n"
    "  --text FILE        the text to score (required)\n"
    "  --ctx N            window length in tokens (default 512)\n"
    "  --stride S         Hugging Face strided windows with this stride (1..ctx; default: llama.cpp windows)\n"
    "  --batch N          tokens per forward pass (default 128; the logits of a batch take N x n_vocab floats)\n"
    "  --kv-type T        KV cache type: F16 (default), F32, INT8_KV, Q8_0, Q4_0 or F8_E4M3\n"
    "  --kld-base T       also run a KV cache of type T over the same batches and report the KL divergence\n"
    "                     of --kv-type's distributions from T's, top-1 agreement and both perplexities\n"
    "  --backend NAME     backend plugin (default: [backend] name, cpu)\n"
    "  --threads N        backend threads (default: [backend] threads, all cores)\n"
    "  --config FILE      loom.toml to read\n";

int64_t parse_int(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs an integer, got '" + value + "'");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the text file '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int run_perplexity(const CommandArgs& args) {
  HostOptions host_options;
  std::string model_path, text_path, backend, kv_type = "F16", kld_base;
  PerplexityOptions options;
  std::optional<int64_t> threads;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (!nothing_after_end_of_options("perplexity", args, i)) return 2;
      break;
    }
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (host_options.parse(args, i)) {
    } else if (a == "--model" || a == "-m") {
      model_path = value();
    } else if (a == "--text" || a == "-f") {
      text_path = value();
    } else if (a == "--ctx" || a == "-c") {
      options.n_ctx = parse_int(a, value());
    } else if (a == "--stride") {
      options.stride = parse_int(a, value());
      if (options.stride < 1) throw std::runtime_error("--stride must be >= 1");
    } else if (a == "--batch" || a == "-b") {
      options.max_batch = parse_int(a, value());
      if (options.max_batch < 1) throw std::runtime_error("--batch must be >= 1");
    } else if (a == "--kv-type") {
      kv_type = value();
    } else if (a == "--kld-base") {
      kld_base = value();
    } else if (a == "--backend") {
      backend = value();
    } else if (a == "--threads" || a == "-t") {
      threads = parse_int(a, value());
      if (*threads < 1) throw std::runtime_error("--threads must be >= 1");
    } else {
      std::cerr << "loom perplexity: unknown argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  if (text_path.empty()) {
    std::cerr << "loom perplexity: --text FILE is required\n" << kUsage;
    return 2;
  }
  const auto kv = dtype_from_name(kv_type);
  if (!kv) throw std::runtime_error("--kv-type: unknown type '" + kv_type + "'");
  options.kv_dtype = *kv;
  if (!kld_base.empty()) {
    options.kld_base = dtype_from_name(kld_base);
    if (!options.kld_base) throw std::runtime_error("--kld-base: unknown type '" + kld_base + "'");
  }

  Config config = host_options.load_config();
  if (!model_path.empty()) config.model.path = model_path;
  if (!backend.empty()) config.backend.name = backend;
  if (threads) config.backend.threads = *threads;
  const std::string text = read_file(text_path);
  ProgressBar load_bar("loading model", "MiB", 1 << 20);
  LoadedModel loaded = load_model(config, [&load_bar](uint64_t done, uint64_t total) { load_bar.update(done, total); });
  load_bar.finish();
  // The text starts with BOS when the model adds one, as llama.cpp's tokenization does.
  const std::vector<int32_t> tokens = loaded.tokenizer->encode(text, true, false);
  if (loaded.tokenizer->add_bos()) options.bos_id = loaded.tokenizer->bos_id();
  const auto windows = plan_perplexity_windows(static_cast<int64_t>(tokens.size()), options);
  int64_t n_to_score = 0;
  for (const auto& w : windows) n_to_score += w.end - w.begin - 1 - w.first_scored;

  std::printf("model: %s on %s (load %.2f s)\n", loaded.path.string().c_str(), loaded.backend->caps().device_name,
              loaded.load_seconds);
  std::printf("text: %s, %zu tokens; %s windows of %lld, %zu windows, %lld tokens scored\n", text_path.c_str(),
              tokens.size(), options.stride == 0 ? "llama.cpp" : ("HF stride " + std::to_string(options.stride)).c_str(),
              static_cast<long long>(options.n_ctx), windows.size(), static_cast<long long>(n_to_score));
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  ProgressBar window_bar("perplexity", "windows");
  const PerplexityResult result =
      compute_perplexity(*loaded.model, tokens, options, [&window_bar](const PerplexityWindowReport& w) {
        window_bar.update(static_cast<uint64_t>(w.index + 1), static_cast<uint64_t>(w.n_windows));
        std::printf("[%lld/%lld] %lld scored, running PPL = %.4f +/- %.4f\n", static_cast<long long>(w.index + 1),
                    static_cast<long long>(w.n_windows), static_cast<long long>(w.running.n), w.running.ppl,
                    w.running.ppl_stderr);
        std::fflush(stdout);
      });
  window_bar.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& s = result.summary;
  std::printf("Final estimate: PPL = %.4f +/- %.4f (mean NLL %.5f +/- %.5f over %lld tokens; %.1f s, %.1f tok/s)\n",
              s.ppl, s.ppl_stderr, s.mean_nll, s.nll_stderr, static_cast<long long>(s.n), seconds,
              seconds > 0 ? double(windows.size()) * double(options.n_ctx) / seconds : 0.0);
  if (result.kld) {
    const auto& k = *result.kld;
    std::printf("Base %s cache: PPL = %.4f +/- %.4f; %s vs %s: PPL ratio %.4f, mean KLD %.6f +/- %.6f (max %.4f), "
                "same top token %.2f%% over %lld tokens\n",
                kld_base.c_str(), k.base.ppl, k.base.ppl_stderr, kv_type.c_str(), kld_base.c_str(),
                k.base.ppl > 0 ? s.ppl / k.base.ppl : 0.0, k.mean_kld, k.kld_stderr, k.max_kld, 100.0 * k.top1_agreement,
                static_cast<long long>(k.n));
  }
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("perplexity", "perplexity of a model over a text file (llama.cpp or HF-strided windows)",
                      run_perplexity);

}  // namespace loom::host
