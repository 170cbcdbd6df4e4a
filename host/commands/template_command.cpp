// `loom template (--template FILE | --model GGUF) [--context FILE]`: render a chat template with a
// JSON context (messages, tools, add_generation_prompt, ...) and print exactly what the model would
// be given, for checking a template against its reference renderer.
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "hf/hf_checkpoint.h"
#include "chat/chat_template.h"
#include "command.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "host_options.h"

namespace loom::host {

namespace {

int usage(int rc) {
  std::cout << "usage: loom template (--template FILE | --model GGUF) [--context FILE] [--]\n\n"
               "Renders a chat template and prints the result exactly (no newline added).\n"
               "  --template FILE  a Jinja chat template file\n"
               "  --model GGUF     the model's own tokenizer.chat_template (no fallback)\n"
               "  --context FILE   JSON object of the template's variables: messages, tools,\n"
               "                   add_generation_prompt, bos_token, eos_token, enable_thinking, ...\n"
               "                   ('-' = standard input; default: one user message 'hello' and\n"
               "                   add_generation_prompt true)\n"
               "Exit status 1 with the error on standard error when the template fails.\n";
  return rc;
}

std::string read_file_or_stdin(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run_template(const CommandArgs& args) {
  std::string template_path, model_path, context_path;
  std::vector<std::string> after_options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (end_of_options(args, i, after_options)) break;
    if (a == "--help" || a == "-h") return usage(0);
    std::string* target = a == "--template" ? &template_path : a == "--model" ? &model_path
                                                            : a == "--context" ? &context_path : nullptr;
    if (target == nullptr) {
      std::cerr << "loom template: unknown option '" << a << "'\n";
      return 2;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "loom template: " << a << " needs a value\n";
      return 2;
    }
    *target = args[++i];
  }
  if (!after_options.empty() || template_path.empty() == model_path.empty()) return usage(2);
  try {
    std::string source;
    if (!template_path.empty()) {
      source = read_file_or_stdin(template_path);
    } else {
      const auto file = hf::open_model_file(model_path);
      const auto own = file.get_string("tokenizer.chat_template");
      if (!own) throw Error(model_path + ": has no tokenizer.chat_template");
      source = *own;
    }
    nlohmann::ordered_json context = {{"messages", {{{"role", "user"}, {"content", "hello"}}}},
                                      {"add_generation_prompt", true}};
    if (!context_path.empty()) {
      const std::string text = read_file_or_stdin(context_path);
      try {
        context = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::parse_error& e) {
        throw Error(context_path + ": not valid JSON: " + e.what());
      }
    }
    std::cout << chat::ChatTemplate::parse(source).render(context);
    std::cout.flush();
    return 0;
  } catch (const Error& e) {
    std::cerr << "loom template: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

LOOM_REGISTER_COMMAND("template", "render a chat template with a JSON context (messages, tools, flags)", run_template);

}  // namespace loom::host
