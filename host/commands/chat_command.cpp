// `loom chat`: an interactive conversation in the terminal with the model's chat template. The
// conversation's K/V stays in the session: each turn re-renders the whole conversation, keeps the
// longest token prefix already in the cache and prefills only the rest.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "chat/chat_template.h"
#include "command.h"
#include "host_options.h"
#include "model/generation.h"

namespace loom::host {

namespace {

const char* kUsage =
    "usage: loom chat [options]\n"
    "\n"
    "Talk to a model in the terminal. Type a message and press Enter; /exit or Ctrl-D quits, /reset starts\n"
    "a new conversation.\n"
    "\n"
    "options:\n"
    "  --model FILE       GGUF model (default: [model] path, $LOOM_MODEL, the installed default model)\n"
    "  --system TEXT      system prompt\n"
    "  --max-tokens N     longest reply in tokens (default 512)\n"
    "  --temp T           temperature; 0 = greedy (default: [sampler] temperature)\n"
    "  --seed S           random seed (default: [sampler] seed; -1 = random)\n"
    "  --top-k K, --top-p P\n"
    "  --backend NAME     backend plugin (default: [backend] name, cpu)\n"
    "  --threads N        backend threads\n"
    "  --n-ctx N          conversation length limit in tokens (default: min(model's, 8192))\n"
    "  --stats            print speeds after every reply\n"
    "  --config FILE      loom.toml to read\n";

int64_t to_int(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs an integer, got '" + value + "'");
}

double to_double(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs a number, got '" + value + "'");
}

// Tokens of the rendered conversation. The template writes BOS itself when it wants one, so the
// tokenizer adds none; a template that forgets it still gets it when the model asks for BOS.
std::vector<int32_t> encode_conversation(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> tokens = tokenizer.encode(text, false, true);
  if (tokenizer.add_bos() && tokenizer.bos_id() >= 0 && (tokens.empty() || tokens[0] != tokenizer.bos_id())) {
    tokens.insert(tokens.begin(), tokenizer.bos_id());
  }
  return tokens;
}

int run_chat(const CommandArgs& args) {
  HostOptions options;
  std::string model_path, backend, system_prompt;
  int64_t max_tokens = 512;
  std::optional<double> temp, top_p;
  std::optional<int64_t> seed, top_k, threads, n_ctx;
  bool show_stats = false;
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
      model_path = value();
    } else if (a == "--system") {
      system_prompt = value();
    } else if (a == "--max-tokens" || a == "-n") {
      max_tokens = to_int(a, value());
    } else if (a == "--temp") {
      temp = to_double(a, value());
    } else if (a == "--seed") {
      seed = to_int(a, value());
    } else if (a == "--top-k") {
      top_k = to_int(a, value());
    } else if (a == "--top-p") {
      top_p = to_double(a, value());
    } else if (a == "--backend") {
      backend = value();
    } else if (a == "--threads" || a == "-t") {
      threads = to_int(a, value());
    } else if (a == "--n-ctx") {
      n_ctx = to_int(a, value());
    } else if (a == "--stats") {
      show_stats = true;
    } else {
      std::cerr << "loom chat: unknown argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  if (max_tokens < 1) throw std::runtime_error("--max-tokens must be >= 1");
  if (threads && *threads < 1) throw std::runtime_error("--threads must be >= 1");
  if (n_ctx && *n_ctx < 1) throw std::runtime_error("--n-ctx must be >= 1");

  Config config = options.load_config();
  if (!model_path.empty()) config.model.path = model_path;
  if (!backend.empty()) config.backend.name = backend;
  if (threads) config.backend.threads = *threads;

  LoadedModel loaded = load_model(config);
  const Tokenizer& tokenizer = *loaded.tokenizer;
  std::string note;
  const chat::ChatTemplate chat_template = config.model.chat_template.empty()
                                               ? chat::ChatTemplate::for_model(*loaded.file, &note)
                                               : chat::ChatTemplate::builtin(config.model.chat_template);
  TokenSampler sampler(config, seed.value_or(config.sampler.seed));
  if (temp) sampler.params().temperature = static_cast<float>(*temp);
  if (top_k) sampler.params().top_k = static_cast<int32_t>(*top_k);
  if (top_p) sampler.params().top_p = static_cast<float>(*top_p);
  sampler.validate();

  SessionOptions session_options;
  session_options.n_ctx = n_ctx ? *n_ctx : std::min<int64_t>(loaded.model->n_ctx(), 8192);
  Session session(*loaded.model, session_options);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  const std::string bos = tokenizer.bos_id() >= 0 ? tokenizer.token_text(tokenizer.bos_id()) : "";
  const std::string eos = tokenizer.eos_id() >= 0 ? tokenizer.token_text(tokenizer.eos_id()) : "";
  std::vector<chat::ChatMessage> messages;
  if (!system_prompt.empty()) messages.push_back({"system", system_prompt});
  if (interactive) {
    std::cerr << "loom chat: " << loaded.path.filename().string() << " on " << loaded.backend->caps().device_name
              << (note.empty() ? "" : "\n(" + note + ")") << "\nType /exit or press Ctrl-D to quit, /reset to start over.\n";
  }
  std::string line;
  while (true) {
    if (interactive) std::cout << "\n> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages.resize(system_prompt.empty() ? 0 : 1);
      session.reset();
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line});
    const std::vector<int32_t> tokens = encode_conversation(tokenizer, chat_template.apply(messages, true, bos, eos));
    // Keep the cached prefix; only what differs is prefilled (at least one token, for logits).
    const std::vector<int32_t>& cached = session.history();
    size_t keep = 0;
    while (keep < cached.size() && keep < tokens.size() && cached[keep] == tokens[keep]) ++keep;
    if (keep == tokens.size()) --keep;
    session.truncate(static_cast<int64_t>(keep));
    const std::span<const int32_t> fresh(tokens.data() + keep, tokens.size() - keep);
    const int64_t room = session.n_ctx() - static_cast<int64_t>(tokens.size());
    if (room < 1) {
      std::cerr << "loom chat: the conversation no longer fits in " << session.n_ctx()
                << " tokens; /reset to start over (or use --n-ctx)\n";
      messages.pop_back();
      continue;
    }
    std::string reply;
    const GenerationStats stats =
        generate_tokens(session, sampler, tokenizer, fresh, std::min(max_tokens, room), [&](const std::string& text) {
          reply += text;
          std::cout << text << std::flush;
        });
    std::cout << "\n" << std::flush;
    messages.push_back({"assistant", reply});
    if (show_stats) {
      std::fprintf(stderr, "[prefilled %lld tokens (%lld cached), TTFT %.1f ms, decode %.1f tok/s]\n",
                   static_cast<long long>(stats.n_prompt), static_cast<long long>(keep), stats.ttft_seconds * 1e3,
                   stats.decode_seconds > 0 ? static_cast<double>(stats.n_decode) / stats.decode_seconds : 0.0);
    }
  }
  if (interactive) std::cout << "\n";
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("chat", "talk to a model in the terminal with its chat template", run_chat);

}  // namespace loom::host
