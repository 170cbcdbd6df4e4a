// The structured-output fields of an OpenAI request: `response_format` (OpenAI: json_object,
// json_schema) and vLLM's `structured_outputs` (json, json_object, regex, choice, grammar), also in
// vLLM's older top-level spelling (guided_json, guided_regex, guided_choice, guided_grammar), so
// clients written for either work. At most one may be given; ApiError 400 names the field.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/grammar_constraint.h"

namespace loom::server {

struct StructuredOutput {
  GrammarSpec spec;
  std::string field;  // where it came from, for error messages ("response_format", "structured_outputs.regex", ...)
};

// `body` keeps the client's key order: xgrammar keeps a schema's properties in the order given.
std::optional<StructuredOutput> parse_structured_output(const nlohmann::ordered_json& body);

}  // namespace loom::server
