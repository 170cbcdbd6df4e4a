#include "engine/json_schema_strict.h"

#include <cmath>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace loom {

namespace {

using json = nlohmann::ordered_json;

// Keywords that say something about a schema without constraining its values.
const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment", "$schema", "$id",
    "$anchor", "$defs", "definitions"};
const std::set<std::string, std::less<>> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                            "multipleOf"};
const std::set<std::string, std::less<>> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string, std::less<>> kObjectKeywords = {
    "properties",    "required",      "additionalProperties", "unevaluatedProperties",
    "patternProperties", "propertyNames", "minProperties",       "maxProperties"};
const std::set<std::string, std::less<>> kArrayKeywords = {"items",    "prefixItems",      "minItems",
                                                           "maxItems", "unevaluatedItems", "uniqueItems"};
// The formats xgrammar turns into a regex; any other format it ignores.
const std::set<std::string, std::less<>> kFormats = {
    "email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid", "uri", "uri-reference",
    "uri-template", "json-pointer", "relative-json-pointer"};
// xgrammar's limits for an integer's multipleOf (json_schema_converter.cc): a modulo automaton up to
// this value when unbounded, and an enumeration when both bounds are at most this far apart.
constexpr double kMultipleOfMax = 1024;
constexpr double kMultipleOfRangeWidthMax = 10000;

bool in(const std::set<std::string, std::less<>>& set, std::string_view key) { return set.find(key) != set.end(); }

// A JSON pointer token: '~' and '/' escaped (RFC 6901).
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class StrictSchema {
 public:
  void check(json& schema, const std::string& path) {
    if (schema.is_boolean()) return;  // true: any value; false: xgrammar refuses it
    if (!schema.is_object()) fail(path, "", "a schema must be an object or a boolean");
    for (const char* container : {"$defs", "definitions"}) {
      if (auto it = schema.find(container); it != schema.end() && it->is_object()) {
        for (auto& [name, sub] : it->items()) check(sub, path + "/" + container + "/" + pointer_token(name));
      }
    }
    refuse_unenforced_everywhere(schema, path);
    // xgrammar reads the first of these a schema holds and ignores every other keyword beside it.
    if (schema.contains("$ref")) return check_ref(schema, path);
    if (schema.contains("const")) return only_beside(schema, path, "const", {"type", "const"});
    if (schema.contains("enum")) return only_beside(schema, path, "enum", {"type", "enum"});
    if (schema.contains("anyOf")) return check_any_of(schema, path);
    if (schema.contains("oneOf")) {
      fail(path, "oneOf", "is not enforced: the grammar engine treats overlapping branches as anyOf; use anyOf");
    }
    if (schema.contains("allOf")) return check_all_of(schema, path);
    if (auto type = schema.find("type"); type != schema.end()) return check_typed(schema, path, *type);
    if (has_any(schema, {"properties", "additionalProperties", "unevaluatedProperties"})) return check_object(schema, path);
    if (has_any(schema, {"items", "prefixItems", "unevaluatedItems"})) return check_array(schema, path);
    // Any value: a number or string keyword would be dropped, and a number or string could break it.
    for (const auto& [key, value] : schema.items()) {
      if (in(kNumberKeywords, key) || in(kStringKeywords, key) || in(kObjectKeywords, key) || in(kArrayKeywords, key)) {
        fail(path, key, "is not enforced without a 'type' (the grammar would allow any JSON value)");
      }
    }
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& keyword, const std::string& why) {
    const std::string at = path.empty() ? "#" : "#" + path;
    if (keyword.empty()) throw Error("strict JSON schema: at " + at + ": " + why);
    throw Error("strict JSON schema: keyword '" + keyword + "' at " + at + " " + why);
  }

  static bool has_any(const json& schema, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      if (schema.contains(key)) return true;
    }
    return false;
  }

  // Keywords no grammar here enforces, and keywords Loom does not know.
  static void refuse_unenforced_everywhere(const json& schema, const std::string& path) {
    for (const auto& [key, value] : schema.items()) {
      if (key == "not" || key == "if" || key == "then" || key == "else" || key == "dependentRequired" ||
          key == "dependentSchemas" || key == "dependencies" || key == "contains" || key == "minContains" ||
          key == "maxContains" || key == "additionalItems") {
        fail(path, key, "is not enforced by the grammar engine");
      }
      if (key == "uniqueItems" && value != json(false)) fail(path, key, "is not enforced by the grammar engine");
      const bool known = in(kAnnotations, key) || in(kNumberKeywords, key) || in(kStringKeywords, key) ||
                         in(kObjectKeywords, key) || in(kArrayKeywords, key) || key == "type" || key == "$ref" ||
                         key == "const" || key == "enum" || key == "anyOf" || key == "oneOf" || key == "allOf";
      if (!known) fail(path, key, "is not a JSON Schema keyword the grammar engine enforces");
    }
  }

  // `keyword` wins and every sibling but annotations and `allowed` is ignored by the grammar engine.
  static void only_beside(const json& schema, const std::string& path, const std::string& keyword,
                          std::initializer_list<const char*> allowed) {
    for (const auto& [key, value] : schema.items()) {
      if (in(kAnnotations, key)) continue;
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (!ok) fail(path, key, "is ignored beside '" + keyword + "'; move it into the " + keyword + " schema");
    }
  }

  void check_ref(json& schema, const std::string& path) {
    const json& ref = schema["$ref"];
    if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0) {
      fail(path, "$ref", "must be a local reference ('#' or '#/...')");
    }
    only_beside(schema, path, "$ref", {"$ref"});
  }

  void check_any_of(json& schema, const std::string& path) {
    only_beside(schema, path, "anyOf", {"anyOf"});
    json& branches = schema["anyOf"];
    if (!branches.is_array() || branches.empty()) fail(path, "anyOf", "must be a non-empty array of schemas");
    for (size_t i = 0; i < branches.size(); ++i) check(branches[i], path + "/anyOf/" + std::to_string(i));
  }

  void check_all_of(json& schema, const std::string& path) {
    only_beside(schema, path, "allOf", {"allOf"});
    json& parts = schema["allOf"];
    if (!parts.is_array() || parts.size() != 1) {
      fail(path, "allOf", "is enforced only with a single schema (the grammar engine allows any value for more)");
    }
    check(parts[0], path + "/allOf/0");
  }

  void check_typed(json& schema, const std::string& path, const json& type) {
    std::vector<std::string> types;
    if (type.is_string()) types.push_back(type.get<std::string>());
    else if (type.is_array()) {
      for (const json& t : type) {
        if (!t.is_string()) fail(path, "type", "must be a string or an array of strings");
        types.push_back(t.get<std::string>());
      }
    } else {
      fail(path, "type", "must be a string or an array of strings");
    }
    // A number whose multipleOf is a whole number is an integer with that multipleOf: every such
    // output is a valid number, and the grammar engine enforces multipleOf only on integers.
    if (types.size() == 1 && types[0] == "number" && schema.contains("multipleOf") && is_whole(schema["multipleOf"])) {
      schema["type"] = "integer";
      round_bounds_inward(schema);
      types[0] = "integer";
    }
    for (const std::string& t : types) {
      if (t == "integer") check_integer(schema, path, types.size() > 1);
      else if (t == "number") check_number(schema, path);
      else if (t == "string") check_string(schema, path);
      else if (t == "object") check_object(schema, path);
      else if (t == "array") check_array(schema, path);
      else if (t != "boolean" && t != "null") fail(path, "type", "'" + t + "' is not a JSON Schema type");
    }
  }

  static bool is_whole(const json& value) {
    return value.is_number() && std::isfinite(value.get<double>()) && std::floor(value.get<double>()) == value.get<double>();
  }

  // The integer bounds equivalent to a number's: minimum 2.5 -> 3, exclusiveMaximum 7 -> maximum 6.
  static void round_bounds_inward(json& schema) {
    auto take = [&](const char* key) -> std::optional<double> {
      auto it = schema.find(key);
      if (it == schema.end() || !it->is_number()) return std::nullopt;
      const double v = it->get<double>();
      schema.erase(key);
      return v;
    };
    std::optional<double> low = take("minimum"), high = take("maximum");
    if (auto x = take("exclusiveMinimum")) low = std::max(low.value_or(-INFINITY), std::floor(*x) + 1);
    if (auto x = take("exclusiveMaximum")) high = std::min(high.value_or(INFINITY), std::ceil(*x) - 1);
    if (low) schema["minimum"] = static_cast<int64_t>(std::ceil(*low));
    if (high) schema["maximum"] = static_cast<int64_t>(std::floor(*high));
  }

  static void check_integer(const json& schema, const std::string& path, bool one_of_several_types) {
    auto it = schema.find("multipleOf");
    if (it == schema.end()) return;
    if (one_of_several_types) fail(path, "multipleOf", "is enforced only when 'type' is 'integer' alone");
    if (!is_whole(*it) || it->get<double>() <= 0 || it->get<double>() > kMultipleOfMax) {
      fail(path, "multipleOf", "is enforced on integers only for whole values from 1 to 1024");
    }
    const bool low = schema.contains("minimum") || schema.contains("exclusiveMinimum");
    const bool high = schema.contains("maximum") || schema.contains("exclusiveMaximum");
    if (!low && !high) return;
    if (low != high) {
      fail(path, "multipleOf", "is not enforced beside a one-sided range; give both bounds (at most 10000 apart) or none");
    }
    auto bound = [&](const char* inclusive, const char* exclusive, double step) {
      if (schema.contains(inclusive) && schema[inclusive].is_number()) return schema[inclusive].get<double>();
      return schema.contains(exclusive) && schema[exclusive].is_number() ? schema[exclusive].get<double>() + step : 0.0;
    };
    if (bound("maximum", "exclusiveMaximum", -1) - bound("minimum", "exclusiveMinimum", 1) > kMultipleOfRangeWidthMax) {
      fail(path, "multipleOf", "is not enforced beside a range wider than 10000");
    }
  }

  static void check_number(const json& schema, const std::string& path) {
    if (schema.contains("multipleOf")) {
      fail(path, "multipleOf", "is enforced on numbers only for whole values (a number becomes an integer then)");
    }
  }

  static void check_string(json& schema, const std::string& path) {
    const bool length = schema.contains("minLength") || schema.contains("maxLength");
    if (auto format = schema.find("format"); format != schema.end()) {
      if (!format->is_string() || !in(kFormats, format->get<std::string>())) {
        fail(path, "format", "'" + format->dump() + "' is not enforced (enforced: date, time, date-time, duration, email, "
                             "hostname, ipv4, ipv6, uri, uri-reference, uri-template, uuid, json-pointer, "
                             "relative-json-pointer)");
      }
      if (length) fail(path, schema.contains("minLength") ? "minLength" : "maxLength", "is not enforced beside 'format'");
      if (schema.contains("pattern")) fail(path, "pattern", "is not enforced beside 'format'");
      // xgrammar's regexes for these accept impossible values (2024-04-31, 064.1.1.1); Loom's do not.
      if (const char* exact = exact_format_regex(format->get<std::string>())) {
        schema.erase("format");
        schema["pattern"] = exact;
      }
      return;
    }
    if (auto pattern = schema.find("pattern"); pattern != schema.end()) {
      if (length) fail(path, schema.contains("minLength") ? "minLength" : "maxLength", "is not enforced beside 'pattern'");
      if (!pattern->is_string()) fail(path, "pattern", "must be a string");
      *pattern = whole_string_regex(pattern->get<std::string>(), path, "pattern");
      return;
    }
    // xgrammar's own length rule admits raw control characters (invalid JSON) and counts bytes of
    // unfinished UTF-8; as a regex, a length counts whole characters of a valid JSON string.
    if (length) {
      auto bound = [&](const char* key) -> std::string {
        auto it = schema.find(key);
        if (it == schema.end()) return "";
        if (!is_whole(*it) || it->get<double>() < 0) fail(path, key, "must be a whole number >= 0");
        return std::to_string(it->get<int64_t>());
      };
      const std::string low = bound("minLength"), high = bound("maxLength");
      schema["pattern"] = "^.{" + (low.empty() ? "0" : low) + "," + high + "}$";
      schema.erase("minLength");
      schema.erase("maxLength");
    }
  }

  // Exact regexes for the formats whose every value a short regex can pin down. A date never holds
  // February 29 (that needs the year), which keeps every output valid. The fraction of a second is
  // spelled out: xgrammar 0.2.9 compiles an optional group holding a repetition, (\.[0-9]{1,6})?,
  // into one that also matches without its '.'.
  static const char* exact_format_regex(const std::string& format) {
    static const std::string date = "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";
    static const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9][0-9]?[0-9]?[0-9]?[0-9]?[0-9]?)?([Zz]|[+\\-]([01][0-9]|2[0-3]):[0-5][0-9])";
    static const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    static const std::string exact_date = "^" + date + "$", exact_time = "^" + time + "$",
                             exact_date_time = "^" + date + "[Tt]" + time + "$",
                             exact_ipv4 = "^" + octet + "(\\." + octet + "){3}$";
    if (format == "date") return exact_date.c_str();
    if (format == "time") return exact_time.c_str();
    if (format == "date-time") return exact_date_time.c_str();
    if (format == "ipv4") return exact_ipv4.c_str();
    return nullptr;
  }

  void check_object(json& schema, const std::string& path) {
    if (auto props = schema.find("properties"); props != schema.end()) {
      if (!props->is_object()) fail(path, "properties", "must be an object");
      for (auto& [name, sub] : props->items()) check(sub, path + "/properties/" + pointer_token(name));
    }
    if (auto required = schema.find("required"); required != schema.end() && required->is_array()) {
      for (const json& name : *required) {
        const bool declared = name.is_string() && schema.contains("properties") && schema["properties"].contains(name.get<std::string>());
        if (!declared) {
          fail(path, "required", "names " + name.dump() + ", which 'properties' does not declare (the grammar engine "
                                 "would drop it)");
        }
      }
    }
    if (schema.contains("additionalProperties") && schema.contains("unevaluatedProperties")) {
      fail(path, "unevaluatedProperties", "is ignored beside 'additionalProperties'");
    }
    for (const char* key : {"additionalProperties", "unevaluatedProperties", "propertyNames"}) {
      if (auto it = schema.find(key); it != schema.end() && it->is_object()) check(*it, path + "/" + key);
    }
    if (auto patterns = schema.find("patternProperties"); patterns != schema.end()) {
      if (!patterns->is_object()) fail(path, "patternProperties", "must be an object");
      json whole = json::object();
      for (auto& [regex, sub] : patterns->items()) {
        const std::string sub_path = path + "/patternProperties/" + pointer_token(regex);
        check(sub, sub_path);
        whole[whole_string_regex(regex, sub_path, "patternProperties")] = sub;
      }
      *patterns = std::move(whole);
    }
  }

  void check_array(json& schema, const std::string& path) {
    if (auto items = schema.find("items"); items != schema.end() && items->is_object()) check(*items, path + "/items");
    if (schema.contains("items") && schema.contains("unevaluatedItems")) {
      fail(path, "unevaluatedItems", "is ignored beside 'items'");
    }
    if (auto it = schema.find("unevaluatedItems"); it != schema.end() && it->is_object()) check(*it, path + "/unevaluatedItems");
    if (auto prefix = schema.find("prefixItems"); prefix != schema.end()) {
      if (!prefix->is_array()) fail(path, "prefixItems", "must be an array of schemas");
      for (size_t i = 0; i < prefix->size(); ++i) check((*prefix)[i], path + "/prefixItems/" + std::to_string(i));
    }
  }

  // JSON Schema's pattern matches anywhere in the string; the grammar engine's matches it whole. So
  // an end that is not anchored gets ".*". A top-level alternation is grouped first, unless it
  // mixes in anchors, whose meaning the grouping would change.
  static std::string whole_string_regex(const std::string& regex, const std::string& path, const std::string& keyword) {
    int depth = 0;
    bool in_class = false, alternation = false;
    for (size_t i = 0; i < regex.size(); ++i) {
      const char c = regex[i];
      if (c == '\\') {
        ++i;
        continue;
      }
      if (in_class) {
        in_class = c != ']';
      } else if (c == '[') {
        in_class = true;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')') {
        --depth;
      } else if (c == '|' && depth == 0) {
        alternation = true;
      }
    }
    const bool starts = !regex.empty() && regex.front() == '^';
    const bool ends = regex.size() >= 1 && regex.back() == '$' && (regex.size() < 2 || regex[regex.size() - 2] != '\\');
    if (alternation) {
      if (starts || ends) fail(path, keyword, "with anchors and a top-level '|' is not supported; group the alternatives");
      return ".*(" + regex + ").*";
    }
    return (starts ? "" : ".*") + regex + (ends ? "" : ".*");
  }
};

}  // namespace

std::string prepare_strict_schema(const std::string& schema_text) {
  json schema = json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) throw Error("strict JSON schema: not valid JSON");
  StrictSchema().check(schema, "");
  return schema.dump();
}

}  // namespace loom
