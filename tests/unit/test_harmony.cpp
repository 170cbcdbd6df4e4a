// gpt-oss's harmony format: the vocabulary prints the message structure and ends a turn at
// <|return|> / <|call|> (not at each message's <|end|>), and the server reads the decoded reply into
// reasoning (analysis), content (final) and tool calls (commentary to=functions.NAME), also while the
// reply is still streaming in.
#include <catch2/catch.hpp>

#include <cstdio>

#include "server/harmony.h"
#include "server/reply_parser_harmony.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

using loom::server::parse_harmony;

namespace {

// A reply as gpt-oss writes it, decoded: <|end|> (control) is not printed, the structure tokens are.
const std::string kReply =
    "<|channel|>analysis<|message|>The user asks for the capital of France. It is Paris."
    "<|start|>assistant<|channel|>final<|message|>The capital of France is Paris.";

}  // namespace

TEST_CASE("harmony: analysis is the reasoning, final the content", "[server][harmony]") {
  const auto reply = parse_harmony(kReply);
  CHECK(reply.reasoning == "The user asks for the capital of France. It is Paris.");
  CHECK(reply.content == "The capital of France is Paris.");
  CHECK(reply.calls.empty());
  CHECK(reply.closed);

  const auto plain = parse_harmony("Just an answer.");
  CHECK(plain.content == "Just an answer.");
  CHECK(plain.reasoning.empty());
}

TEST_CASE("harmony: a reply streamed a byte at a time never shows a marker, and adds up to the whole", "[server][harmony]") {
  const auto full = parse_harmony(kReply);
  auto parser = loom::server::harmony_reply_parser();
  std::vector<loom::server::ReplyEvent> events;
  for (size_t n = 0; n < kReply.size(); ++n) parser->feed(std::string_view(kReply).substr(n, 1), events);
  parser->finish(events);
  std::string reasoning, content;
  for (const auto& event : events) {
    INFO("event text '" << event.text << "'");
    REQUIRE(event.text.find('<') == std::string::npos);
    REQUIRE(event.text.find("assistant") == std::string::npos);
    (event.kind == loom::server::ReplyEvent::Kind::reasoning ? reasoning : content) += event.text;
  }
  CHECK(reasoning == full.reasoning);
  CHECK(content == full.content);
}

TEST_CASE("harmony: a commentary message to functions.NAME is a tool call", "[server][harmony]") {
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather.<|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}";
  const auto reply = parse_harmony(text);
  REQUIRE(reply.calls.size() == 1);
  CHECK(reply.calls[0].name == "get_weather");
  CHECK(reply.calls[0].arguments == "{\"location\": \"Paris\"}");
  CHECK(reply.reasoning == "Need the weather.");
  CHECK(reply.content.empty());
  // The recipient may also stand before the channel.
  const auto before = parse_harmony("<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{}");
  REQUIRE(before.calls.size() == 1);
  CHECK(before.calls[0].name == "lookup");
}

TEST_CASE("harmony: the template is recognised", "[server][harmony]") {
  CHECK(loom::server::template_is_harmony(
      "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|return|>\" }}"));
  CHECK_FALSE(loom::server::template_is_harmony("{{ '<|im_start|>assistant\\n' }}"));
}

TEST_CASE("harmony: the vocabulary prints the structure and ends a turn at <|return|> or <|call|>", "[tokenizer][harmony]") {
  using loom::tokenizer::TokenType;
  loom::tokenizer::VocabData v;
  v.kind = loom::tokenizer::VocabKind::spm;
  auto add = [&](const std::string& text, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(0.0f);
    v.types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  };
  v.unk_id = add("<unk>", TokenType::unknown);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, TokenType::byte);
  }
  const int32_t start = add("<|start|>", TokenType::control), channel = add("<|channel|>", TokenType::control);
  const int32_t message = add("<|message|>", TokenType::control), end = add("<|end|>", TokenType::control);
  const int32_t ret = add("<|return|>", TokenType::control), call = add("<|call|>", TokenType::control);
  const int32_t word = add("final", TokenType::normal);
  v.eos_id = ret;
  v.eot_id = end;  // as a converter may record it
  const auto tok = loom::Tokenizer::from_vocab(v);
  CHECK(tok->decode({channel, word, message}) == "<|channel|>final<|message|>");
  CHECK(tok->decode({start, end}) == "<|start|>");
  CHECK(tok->is_end_of_generation(ret));
  CHECK(tok->is_end_of_generation(call));
  CHECK_FALSE(tok->is_end_of_generation(end));

  // Without <|return|> and <|call|> it is not harmony: <|end|> ends a turn (Phi-3) and stays unprinted.
  v.tokens[static_cast<size_t>(ret)] = "<|r|>";
  v.tokens[static_cast<size_t>(call)] = "<|c|>";
  v.eos_id = end;
  const auto phi = loom::Tokenizer::from_vocab(v);
  CHECK(phi->is_end_of_generation(end));
  CHECK(phi->decode({channel}).empty());
}
