// `loom chat`: an interactive conversation in the terminal with the model's chat template. The
// conversation's K/V stays in the session: each turn re-renders the whole conversation, keeps the
// longest token prefix already in the cache and prefills only the rest.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "chat/chat_template.h"
#include "vision/image_decode.h"
#include "command.h"
#include "host_options.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/default_model.h"
#include "tokenizer/tokenizer.h"
#include "progress_bar.h"

namespace loom::host {

namespace {

const char* kUsage =
    "usage: loom chat [options]\n"
    "\n"
    "Talk to a model in the terminal. Type a message and press Enter; /exit or Ctrl-D quits, /reset starts\n"
    "a new conversation, /image FILE attaches an image to the next message (a model with a vision encoder).\n"
    "\n"
    "options:\n"
    "  --model FILE       GGUF model (default: [model] path, $LOOM_MODEL, $LOOM_CHAT_MODEL, the installed chat model)\n"
    "  --system TEXT      system prompt\n"
    "  --image FILE       attach a PNG, JPEG or WebP image to the first message (repeatable)\n"
    "  --mmproj FILE      vision projector GGUF (default: [model] mmproj, the mmproj*.gguf beside the model)\n"
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

// An image file through the engine's encoder (cached by content), for the next message.
EncodedImage load_image(Engine& engine, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the image '" + path + "'");
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  return engine.encode_image(vision::decode_image(bytes));
}

int run_chat(const CommandArgs& args) {
  HostOptions options;
  std::string model_path, backend, system_prompt;
  int64_t max_tokens = 512;
  std::optional<double> temp, top_p;
  std::optional<int64_t> seed, top_k, threads, n_ctx;
  bool show_stats = false;
  std::vector<std::string> pending_images;  // attached to the next message
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      if (!nothing_after_end_of_options("chat", args, i)) return 2;
      break;
    }
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
    } else if (a == "--image") {
      pending_images.push_back(value());
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

  if (n_ctx) config.model.n_ctx = *n_ctx;
  else if (config.model.n_ctx == 0) config.model.n_ctx = 8192;
  std::string model_note;
  const std::filesystem::path path = config.model.path.empty() ? default_chat_model_path(&model_note) : std::filesystem::path(config.model.path);
  if (!model_note.empty()) std::cerr << "loom chat: warning: " << model_note << "\n";
  // One engine, one conversation: every turn resubmits the whole conversation and the prefix cache
  // finds the blocks of the turns before it, so only the new turn is prefilled.
  config.kv.prefix_caching = true;
  ProgressBar load_bar("loading model", "MiB", 1 << 20);
  Engine engine(config, path, [&load_bar](uint64_t done, uint64_t total) { load_bar.update(done, total); });
  load_bar.finish();
  const Tokenizer& tokenizer = engine.tokenizer();
  std::string note;
  const chat::ChatTemplate chat_template = config.model.chat_template.empty()
                                               ? chat::ChatTemplate::for_model(engine.gguf(), &note)
                                               : chat::ChatTemplate::builtin(config.model.chat_template);
  loom_sampling_params params = engine.default_sampling();
  if (temp) params.temperature = static_cast<float>(*temp);
  if (top_k) params.top_k = static_cast<int32_t>(*top_k);
  if (top_p) params.top_p = static_cast<float>(*top_p);
  const int64_t base_seed = seed.value_or(config.sampler.seed);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  const std::string bos = tokenizer.bos_id() >= 0 ? tokenizer.token_text(tokenizer.bos_id()) : "";
  const std::string eos = tokenizer.eos_id() >= 0 ? tokenizer.token_text(tokenizer.eos_id()) : "";
  std::vector<chat::ChatMessage> messages;
  std::vector<EncodedImage> images;  // the conversation's, in order: each sits at a marker in a message
  if (!system_prompt.empty()) messages.push_back({"system", system_prompt});
  if (!pending_images.empty() && !engine.takes_images())
    throw std::runtime_error("--image: this model takes no images (no vision encoder: pass --mmproj FILE or set [model] mmproj)");
  if (interactive) {
    std::cerr << "loom chat: " << path.filename().string() << " on " << engine.info().device_name
              << (note.empty() ? "" : "\n(" + note + ")") << "\nType /exit or press Ctrl-D to quit, /reset to start over.\n";
  }
  std::string line;
  for (int turn = 0;; ++turn) {
    if (interactive) std::cout << "\n> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages.resize(system_prompt.empty() ? 0 : 1);
      images.clear();
      continue;
    }
    if (line.starts_with("/image ")) {
      if (!engine.takes_images()) {
        std::cerr << "loom chat: this model takes no images (no vision encoder: pass --mmproj FILE)\n";
      } else {
        pending_images.push_back(line.substr(7));
        std::cerr << "loom chat: " << line.substr(7) << " goes with your next message\n";
      }
      continue;
    }
    if (line.empty()) continue;
    std::string content;
    const size_t n_images_before = images.size();
    try {
      for (const std::string& file : pending_images) {
        images.push_back(load_image(engine, file));
        content += private_image_marker();  // mtmd's layout: the image, then the text
      }
    } catch (const std::exception& e) {
      std::cerr << "loom chat: " << e.what() << "\n";
      images.resize(n_images_before);
      pending_images.clear();
      continue;
    }
    pending_images.clear();
    messages.push_back({"user", content + line});
    Request request;
    if (images.empty()) {
      request.prompt = encode_conversation(tokenizer, chat_template.apply(messages, true, bos, eos));
    } else {
      ImagePrompt prompt =
          build_image_prompt(tokenizer, chat_template.apply(messages, true, bos, eos), images, engine.image_format(), private_image_marker());
      request.prompt = std::move(prompt.tokens);
      request.images = std::move(prompt.images);
    }
    const int64_t room = engine.info().n_ctx - static_cast<int64_t>(request.prompt.size());
    if (room < 1) {
      std::cerr << "loom chat: the conversation no longer fits in " << engine.info().n_ctx
                << " tokens; /reset to start over (or use --n-ctx)\n";
      messages.pop_back();
      images.resize(n_images_before);
      continue;
    }
    request.max_tokens = static_cast<uint32_t>(std::min(max_tokens, room));
    request.sampling.params = params;
    if (base_seed >= 0) request.sampling.seed = static_cast<uint64_t>(base_seed + turn);
    std::string reply;
    RequestEvent last;
    Clock::time_point submitted = Clock::now(), first, end;
    uint32_t n_generated = 0;
    request.on_event = [&](const RequestEvent& e) {
      if (!e.tokens.empty()) {
        if (n_generated == 0) first = Clock::now();
        end = Clock::now();
        n_generated += static_cast<uint32_t>(e.tokens.size());
      }
      reply += e.text;
      std::cout << e.text << std::flush;
      if (e.finish != FinishReason::none) last = e;
    };
    const auto n_prompt = request.prompt.size();
    engine.submit(std::move(request));
    while (engine.n_unfinished() > 0) engine.step();
    std::cout << "\n" << std::flush;
    if (last.finish == FinishReason::error) throw std::runtime_error(last.error);
    messages.push_back({"assistant", reply});
    if (show_stats) {
      auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
      const double decode = seconds(first, end);
      std::fprintf(stderr, "[prompt %zu tokens (%u from the prefix cache), TTFT %.1f ms, decode %.1f tok/s]\n", n_prompt,
                   last.n_cached_tokens, seconds(submitted, first) * 1e3,
                   decode > 0 && n_generated > 1 ? (n_generated - 1) / decode : 0.0);
    }
  }
  if (interactive) std::cout << "\n";
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("chat", "talk to a model in the terminal with its chat template", run_chat);

}  // namespace loom::host
