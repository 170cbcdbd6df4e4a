// `loom tokenize --model FILE [--no-bos] [--no-special] [--ids-only] "text"`: show how a model's
// tokenizer splits text, one token per line (id and piece), then the round-trip decode.
#include <chrono>
#include <iostream>
#include <string>

#include "command.h"
#include "host_options.h"
#include "gguf/gguf_file.h"
#include "hf/hf_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace loom::host {

namespace {

// Makes control characters visible so each token stays on one line.
std::string printable(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          static const char hex[] = "0123456789ABCDEF";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

int usage(int rc) {
  std::cout << "usage: loom tokenize --model FILE [--no-bos] [--no-special] [--ids-only] [--] TEXT\n\n"
               "Tokenizes TEXT with the tokenizer stored in the GGUF FILE and prints one token per line:\n"
               "its id and its piece (raw bytes, control characters escaped).\n"
               "  --no-bos      do not add BOS/EOS even when the model asks for them\n"
               "  --no-special  treat text like <start_of_turn> as plain text, not as a control token\n"
               "  --ids-only    print only the ids, on one line\n"
               "  --            end of options: TEXT may start with '-' (every loom command takes it)\n";
  return rc;
}

int run_tokenize(const CommandArgs& args) {
  std::string model;
  std::string text;
  bool have_text = false;
  bool add_special = true;
  bool parse_special = true;
  bool ids_only = false;
  std::vector<std::string> after_options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (end_of_options(args, i, after_options)) break;
    if (a == "--help" || a == "-h") return usage(0);
    if (a == "--model" || a == "-m") {
      if (i + 1 >= args.size()) {
        std::cerr << "loom tokenize: --model needs a file\n";
        return 2;
      }
      model = args[++i];
    } else if (a == "--no-bos") {
      add_special = false;
    } else if (a == "--no-special") {
      parse_special = false;
    } else if (a == "--ids-only") {
      ids_only = true;
    } else if (!have_text) {
      text = a;
      have_text = true;
    } else {
      std::cerr << "loom tokenize: unexpected argument '" << a << "' (quote the text as one argument)\n";
      return 2;
    }
  }
  for (const std::string& a : after_options) {
    if (have_text) {
      std::cerr << "loom tokenize: unexpected argument '" << a << "' (quote the text as one argument)\n";
      return 2;
    }
    text = a;
    have_text = true;
  }
  if (model.empty() || !have_text) return usage(2);

  const auto load_start = std::chrono::steady_clock::now();
  const auto file = hf::open_model_file(model);
  const auto tokenizer = Tokenizer::from_gguf(file);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  const std::vector<int32_t> ids = tokenizer->encode(text, add_special, parse_special);

  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << "\n";
    return 0;
  }
  std::cout << "model: " << file.get_string("tokenizer.ggml.model").value_or("?") << " ("
            << file.get_string("tokenizer.ggml.pre").value_or("default") << "), " << tokenizer->n_vocab()
            << " tokens, loaded in " << static_cast<int>(load_ms) << " ms\n";
  for (int32_t id : ids) {
    std::cout << id << "\t'" << printable(tokenizer->token_to_piece(id, true)) << "'\n";
  }
  std::cout << ids.size() << " tokens\n";
  std::cout << "decoded: '" << printable(tokenizer->decode(ids, true)) << "'\n";
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("tokenize", "show a model's tokens for a text (ids and pieces)", run_tokenize);

}  // namespace loom::host
