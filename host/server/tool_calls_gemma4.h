// Gemma 4's tool calls: <|tool_call>call:NAME{key:value,...}<tool_call|>, where keys are bare,
// strings are wrapped in <|"|> ... <|"|> (no escaping inside), and numbers, true, false, null,
// nested {...} and [...] are written as in JSON (llama.cpp's common/parsers/gemma4.cpp reads the
// same grammar). Each call's arguments come back as a JSON object.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace loom::server {

// The calls of a Gemma 4 reply in order, as {name, arguments (JSON object)} pairs and the text
// outside them; nullopt for a block that does not parse (the caller then keeps the text as content).
struct Gemma4Call {
  std::string name;
  nlohmann::ordered_json arguments;
};
struct Gemma4Reply {
  std::string content;
  std::vector<Gemma4Call> calls;
};
std::optional<Gemma4Reply> parse_gemma4_tool_calls(const std::string& text);

}  // namespace loom::server
