#include "server/structured_output_parse.h"

#include <vector>

#include "server/api_error.h"

namespace loom::server {

namespace {

using json = nlohmann::ordered_json;
using Kind = GrammarSpec::Kind;

const json* present(const json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A JSON schema given as an object or as a JSON string holding one.
std::string schema_text(const json& value, const std::string& field) {
  if (value.is_object()) return value.dump();
  if (value.is_string()) {
    const json parsed = json::parse(value.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) throw invalid_param(field, "'" + field + "' is not a JSON object");
    return parsed.dump();
  }
  throw invalid_param(field, "'" + field + "' must be a JSON schema object");
}

std::string non_empty_string(const json& value, const std::string& field) {
  if (!value.is_string() || value.get<std::string>().empty()) throw invalid_param(field, "'" + field + "' must be a non-empty string");
  return value.get<std::string>();
}

std::vector<std::string> choice_list(const json& value, const std::string& field) {
  if (!value.is_array() || value.empty()) throw invalid_param(field, "'" + field + "' must be a non-empty array of strings");
  std::vector<std::string> choices;
  for (const json& c : value) {
    if (!c.is_string()) throw invalid_param(field, "'" + field + "' must hold only strings");
    choices.push_back(c.get<std::string>());
  }
  return choices;
}

std::optional<StructuredOutput> from_response_format(const json& format) {
  if (!format.is_object()) throw invalid_param("response_format", "'response_format' must be an object");
  const json* type = present(format, "type");
  if (type == nullptr || !type->is_string()) throw invalid_param("response_format", "'response_format.type' must be a string");
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") return StructuredOutput{{Kind::json_object, "", {}}, "response_format"};
  if (t == "json_schema") {
    const json* wrapper = present(format, "json_schema");
    if (wrapper == nullptr || !wrapper->is_object()) {
      throw invalid_param("response_format", "'response_format.json_schema' must be an object with a 'schema'");
    }
    const json* schema = present(*wrapper, "schema");
    if (schema == nullptr) throw invalid_param("response_format", "'response_format.json_schema.schema' is missing");
    const json* strict = present(*wrapper, "strict");
    if (strict != nullptr && !strict->is_boolean()) {
      throw invalid_param("response_format", "'response_format.json_schema.strict' must be a boolean");
    }
    GrammarSpec spec{Kind::json_schema, schema_text(*schema, "response_format.json_schema.schema"), {}};
    spec.strict = strict != nullptr && strict->get<bool>();
    return StructuredOutput{std::move(spec), "response_format"};
  }
  throw invalid_param("response_format",
                      "'response_format.type' is '" + t + "'; supported: 'text', 'json_object', 'json_schema'");
}

// vLLM's structured_outputs object (or its older guided_* fields, prefix "guided_").
std::optional<StructuredOutput> from_vllm_fields(const json& object, const std::string& prefix, const std::string& where) {
  std::optional<StructuredOutput> out;
  auto take = [&](const char* name, auto&& make) {
    const json* value = present(object, (prefix + name).c_str());
    if (value == nullptr) return;
    const std::string field = where.empty() ? prefix + name : where + "." + name;
    if (out) throw invalid_param(field, "give only one of json, json_object, regex, choice and grammar (also got " + out->field + ")");
    out = StructuredOutput{make(*value, field), field};
  };
  take("json", [](const json& v, const std::string& f) { return GrammarSpec{Kind::json_schema, schema_text(v, f), {}}; });
  take("json_object", [](const json& v, const std::string& f) {
    if (!v.is_boolean() || !v.get<bool>()) throw invalid_param(f, "'" + f + "' must be true when given");
    return GrammarSpec{Kind::json_object, "", {}};
  });
  take("regex", [](const json& v, const std::string& f) { return GrammarSpec{Kind::regex, non_empty_string(v, f), {}}; });
  take("choice", [](const json& v, const std::string& f) { return GrammarSpec{Kind::choice, "", choice_list(v, f)}; });
  take("grammar", [](const json& v, const std::string& f) { return GrammarSpec{Kind::ebnf, non_empty_string(v, f), {}}; });
  return out;
}

}  // namespace

std::optional<StructuredOutput> parse_structured_output(const nlohmann::ordered_json& body) {
  std::vector<StructuredOutput> given;
  if (const json* format = present(body, "response_format")) {
    if (auto s = from_response_format(*format)) given.push_back(std::move(*s));
  }
  if (const json* so = present(body, "structured_outputs")) {
    if (!so->is_object()) throw invalid_param("structured_outputs", "'structured_outputs' must be an object");
    if (auto s = from_vllm_fields(*so, "", "structured_outputs")) given.push_back(std::move(*s));
  }
  if (auto s = from_vllm_fields(body, "guided_", "")) given.push_back(std::move(*s));
  if (given.size() > 1) {
    throw invalid_param(given[1].field, "give only one of response_format, structured_outputs and guided_* (got " +
                                            given[0].field + " and " + given[1].field + ")");
  }
  if (given.empty()) return std::nullopt;
  return std::move(given.front());
}

}  // namespace loom::server
