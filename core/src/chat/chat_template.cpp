#include "chat/chat_template.h"

#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_eval.h"
#include "common/error.h"
#include "gguf/gguf_file.h"

namespace loom::chat {
namespace {

// The published templates, verbatim apart from whitespace where marked.
constexpr std::string_view chatml_source =
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}";

// Gemma 3 (text part of google/gemma-3-*-it's template).
constexpr std::string_view gemma_source = R"({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)";

// Meta-Llama-3-8B-Instruct.
constexpr std::string_view llama3_source =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}";

// Mistral-7B-Instruct-v0.1/v0.2 (no system role).
constexpr std::string_view mistral_source =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

// JSON as the Jinja values Python's json.loads would give a Hugging Face template.
jinja::Value to_value(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return jinja::Value::none();
    case nlohmann::ordered_json::value_t::boolean: return jinja::Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return jinja::Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return jinja::Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return jinja::Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::Array list;
      for (const auto& item : j) list.push_back(to_value(item));
      return jinja::Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::Object obj;
      for (const auto& [key, item] : j.items()) obj.set(key, to_value(item));
      return jinja::Value(std::move(obj));
    }
    default: return jinja::Value();  // binary / discarded: nothing a template can read
  }
}

std::string builtin_for_architecture(std::string_view arch) {
  if (arch.rfind("gemma", 0) == 0) return "gemma";
  if (arch == "llama") return "llama3";
  return "chatml";
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body)
    : source_(std::move(source)), body_(std::move(body)) {}

ChatTemplate ChatTemplate::parse(std::string source) {
  auto body = std::make_shared<const jinja::Body>(jinja::parse_template(source));
  return ChatTemplate(std::move(source), std::move(body));
}

std::string ChatTemplate::builtin_source(std::string_view name) {
  if (name == "chatml") return std::string(chatml_source);
  if (name == "gemma") return std::string(gemma_source);
  if (name == "llama3") return std::string(llama3_source);
  if (name == "mistral") return std::string(mistral_source);
  throw Error("unknown built-in chat template '" + std::string(name) + "' (known: chatml, gemma, llama3, mistral)");
}

ChatTemplate ChatTemplate::builtin(std::string_view name) { return parse(builtin_source(name)); }

ChatTemplate ChatTemplate::for_model(const gguf::GgufFile& file, std::string* note) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  const std::string fallback = builtin_for_architecture(arch);
  const std::optional<std::string> source = file.get_string("tokenizer.chat_template");
  if (!source) {
    if (note) *note = "the model has no tokenizer.chat_template; using Loom's built-in '" + fallback + "' template";
    return builtin(fallback);
  }
  try {
    ChatTemplate own = parse(*source);
    // A dry run catches templates that parse but use something Loom lacks.
    own.apply({{"user", "hello"}}, true, "", "");
    return own;
  } catch (const Error& e) {
    if (note) {
      *note = std::string("Loom cannot run the model's chat template (") + e.what() + "); using the built-in '" +
              fallback + "' template";
    }
    return builtin(fallback);
  }
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                const std::string& bos_token, const std::string& eos_token) const {
  jinja::Array list;
  for (const auto& m : messages) {
    jinja::Object obj;
    obj.set("role", m.role);
    obj.set("content", m.content);
    list.emplace_back(std::move(obj));
  }
  jinja::Object vars;
  vars.set("messages", std::move(list));
  vars.set("add_generation_prompt", add_generation_prompt);
  vars.set("bos_token", bos_token);
  vars.set("eos_token", eos_token);
  return jinja::render(*body_, vars);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw Error("chat template: the context must be a JSON object");
  jinja::Object vars;
  vars.set("add_generation_prompt", false);
  vars.set("bos_token", "");
  vars.set("eos_token", "");
  for (const auto& [key, item] : context.items()) vars.set(key, to_value(item));
  return jinja::render(*body_, vars);
}

}  // namespace loom::chat
