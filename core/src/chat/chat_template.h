// Chat templates: render a conversation into the prompt text a model was trained on, by running the
// model's tokenizer.chat_template (a Jinja2 string) with Loom's Jinja subset (jinja_*.{h,cpp}).
//
// Fallback, documented: when a model has no template, or Loom cannot parse or run its template,
// ChatTemplate::for_model picks a built-in one by architecture (Gemma, Llama 3, Mistral) and otherwise
// ChatML (<|im_start|>role\n...<|im_end|>), and says so in `note`.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace loom::gguf {
class GgufFile;
}

namespace loom::jinja {
struct Stmt;
}

namespace loom::chat {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

class ChatTemplate {
 public:
  // loom::Error "chat template: line N: ..." naming the problem when `source` is not valid Jinja
  // (or uses syntax Loom does not support).
  static ChatTemplate parse(std::string source);
  // Built-in templates: "chatml", "gemma", "llama3", "mistral". loom::Error for other names.
  static ChatTemplate builtin(std::string_view name);
  static std::string builtin_source(std::string_view name);
  // The model's own template when Loom can run it, else the fallback described above.
  // `note` (optional) receives a one-line explanation when a fallback was used.
  static ChatTemplate for_model(const gguf::GgufFile& file, std::string* note = nullptr);

  // Renders the conversation. loom::Error on template errors, including the template's own
  // raise_exception("...") (e.g. roles that do not alternate), whose message is included.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                    const std::string& bos_token = "", const std::string& eos_token = "") const;

  // Renders with `context` as the template's variables, the way Hugging Face's apply_chat_template
  // passes them: `messages` (any fields: tool_calls, reasoning_content, tool_call_id, ...), `tools`,
  // `add_generation_prompt`, `bos_token`, `eos_token` and extra keys such as `enable_thinking`.
  // Ordered JSON, so objects keep their key order (templates print tools with tojson). loom::Error
  // as for apply(), and when context is not an object.
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body);
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body_;
};

}  // namespace loom::chat
