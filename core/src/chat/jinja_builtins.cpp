// Filters, tests and methods: the subset of Jinja and Python that chat templates use.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "chat/jinja_eval.h"
#include "common/error.h"

namespace loom::jinja {
namespace {

const std::string whitespace = " \t\n\r\f\v";

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end && chars.find(s[begin]) != std::string::npos) ++begin;
  }
  if (right) {
    while (end > begin && chars.find(s[end - 1]) != std::string::npos) --end;
  }
  return s.substr(begin, end - begin);
}

std::string map_chars(std::string s, int (*fn)(int)) {
  for (char& c : s) c = static_cast<char>(fn(static_cast<unsigned char>(c)));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = map_chars(s, [](int c) { return std::tolower(c); });
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
    start = !std::isalnum(u);
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count = -1) {
  if (from.empty()) return s;
  size_t pos = 0;
  while (count != 0 && (pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
    --count;
  }
  return s;
}

Array split(const std::string& s, const Value& sep, int64_t max_split) {
  Array out;
  if (sep.is_undefined() || sep.is_none()) {  // Python: runs of whitespace, no empty parts
    size_t pos = 0;
    while (true) {
      pos = s.find_first_not_of(whitespace, pos);
      if (pos == std::string::npos) break;
      if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split) {
        out.emplace_back(strip(s.substr(pos), whitespace, false, true));
        break;
      }
      const size_t end = s.find_first_of(whitespace, pos);
      out.emplace_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
      if (end == std::string::npos) break;
      pos = end;
    }
    return out;
  }
  const std::string& delim = sep.as_string();
  if (delim.empty()) throw Error("chat template: split() separator is empty");
  size_t pos = 0;
  while (true) {
    const size_t next = max_split >= 0 && static_cast<int64_t>(out.size()) == max_split ? std::string::npos : s.find(delim, pos);
    out.emplace_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + delim.size();
  }
  return out;
}

Array as_list(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::array: return v.array();
    case Value::Kind::undefined: return {};
    case Value::Kind::string: {
      Array out;
      for (char c : v.as_string()) out.emplace_back(std::string(1, c));
      return out;
    }
    case Value::Kind::object: {
      Array out;
      for (const auto& item : v.object().items) out.emplace_back(item.first);
      return out;
    }
    default: fail_at(line, "cannot iterate over a " + v.type_name());
  }
}

Value attribute_of(const Value& v, const std::string& attribute) {
  if (!v.is_object()) return Value();
  const Value* found = v.object().find(attribute);
  return found ? *found : Value();
}

bool starts_or_ends(const std::string& s, const Value& affix, bool start, int line) {
  const auto one = [&](const Value& a) {
    if (!a.is_string()) fail_at(line, std::string(start ? "startswith" : "endswith") + "() needs a string");
    const std::string& t = a.as_string();
    if (t.size() > s.size()) return false;
    return start ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_array()) {
    return std::any_of(affix.array().begin(), affix.array().end(), one);
  }
  return one(affix);
}

// Python's ordering of two values for sort/dictsort/min/max: numbers by value, strings by code
// point (lowercased unless case_sensitive, as Jinja's filters default), otherwise by type name.
bool sort_less(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_number() && b.is_number()) return a.as_float() < b.as_float();
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.as_string() < b.as_string();
    return map_chars(a.as_string(), [](int c) { return std::tolower(c); }) <
           map_chars(b.as_string(), [](int c) { return std::tolower(c); });
  }
  return a.type_name() < b.type_name();
}

// Python's str.format for the fields templates use: "{}", "{0}" and "{name}" (no format specs).
std::string format_string(const std::string& s, const CallArgs& args, int line) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) {
      out += s[i++];
      continue;
    }
    if (s[i] != '{') {
      out += s[i];
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos) fail_at(line, "format(): unmatched '{'");
    const std::string field = s.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) fail_at(line, "format(): format specs are not supported");
    Value v;
    if (field.empty()) {
      v = args.get(next_auto++, "");
    } else if (std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      v = args.get(std::stoul(field), "");
    } else {
      v = args.get(SIZE_MAX, field);
    }
    if (v.is_undefined()) fail_at(line, "format(): no value for field '{" + field + "}'");
    out += v.str();
    i = close;
  }
  return out;
}

}  // namespace

void fail_at(int line, const std::string& message) {
  throw Error("chat template: line " + std::to_string(line) + ": " + message);
}

Value apply_filter(const std::string& name, const Value& input, CallArgs& args, int line) {
  static const std::string empty;
  const auto need_string = [&]() -> const std::string& {
    if (input.is_undefined()) return empty;  // Jinja prints an undefined value as ""
    if (!input.is_string()) fail_at(line, "filter '" + name + "' needs a string, got a " + input.type_name());
    return input.as_string();
  };
  if (name == "trim") return strip(need_string(), whitespace, true, true);
  if (name == "upper") return map_chars(need_string(), [](int c) { return std::toupper(c); });
  if (name == "lower") return map_chars(need_string(), [](int c) { return std::tolower(c); });
  if (name == "capitalize") return capitalize(need_string());
  if (name == "title") return title(need_string());
  if (name == "string") return input.str();
  if (name == "safe" || name == "e" || name == "escape") return input;
  if (name == "length" || name == "count") {
    if (input.is_string()) return static_cast<int64_t>(input.as_string().size());
    if (input.is_array()) return static_cast<int64_t>(input.array().size());
    if (input.is_object()) return static_cast<int64_t>(input.object().items.size());
    if (input.is_undefined()) return 0;
    fail_at(line, "filter 'length' needs a string, list or dict, got a " + input.type_name());
  }
  if (name == "default" || name == "d") {
    const bool boolean = args.get(1, "boolean", Value(false)).truthy();
    const bool use_default = input.is_undefined() || (boolean && !input.truthy());
    return use_default ? args.get(0, "default_value", Value(std::string())) : input;
  }
  if (name == "tojson") {
    const Value indent = args.get(0, "indent");
    return input.to_json(indent.is_number() ? static_cast<int>(indent.as_int()) : 0);
  }
  if (name == "first" || name == "last") {
    Array items = as_list(input, line);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return as_list(input, line);
  if (name == "reverse") {
    if (input.is_string()) return std::string(input.as_string().rbegin(), input.as_string().rend());
    Array items = as_list(input, line);
    std::reverse(items.begin(), items.end());
    return items;
  }
  if (name == "join") {
    const std::string sep = args.get(0, "d", Value(std::string())).str();
    const Value attribute = args.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : as_list(input, line)) {
      out += (first ? "" : sep) + (attribute.is_undefined() ? item : attribute_of(item, attribute.str())).str();
      first = false;
    }
    return out;
  }
  if (name == "replace") {
    const Value count = args.get(2, "count");
    return replace_all(need_string(), args.get(0, "old").str(), args.get(1, "new").str(),
                       count.is_number() ? count.as_int() : -1);
  }
  if (name == "int") {
    if (input.is_number()) return input.as_int();
    try {
      return static_cast<int64_t>(std::stoll(input.str()));
    } catch (const std::exception&) {
      return args.get(0, "default", Value(0));
    }
  }
  if (name == "float") {
    if (input.is_number()) return input.as_float();
    try {
      return std::stod(input.str());
    } catch (const std::exception&) {
      return args.get(0, "default", Value(0.0));
    }
  }
  if (name == "abs") {
    if (!input.is_number()) fail_at(line, "filter 'abs' needs a number");
    return input.kind() == Value::Kind::integer ? Value(std::abs(input.as_int())) : Value(std::fabs(input.as_float()));
  }
  if (name == "items") {
    if (!input.is_object()) fail_at(line, "filter 'items' needs a dict, got a " + input.type_name());
    Array out;
    for (const auto& [k, v] : input.object().items) out.emplace_back(Array{Value(k), v});
    return out;
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "selectattr" || name == "select";
    const size_t test_index = by_attr ? 1 : 0;
    Array out;
    if (!input.truthy()) return out;  // Jinja selects nothing from None, undefined or empty
    for (const Value& item : as_list(input, line)) {
      const Value subject = by_attr ? attribute_of(item, args.get(0, "attribute").str()) : item;
      bool passed = false;
      if (args.positional.size() > test_index) {
        CallArgs test_args;
        test_args.positional.assign(args.positional.begin() + static_cast<long>(test_index) + 1, args.positional.end());
        passed = apply_test(args.positional[test_index].str(), subject, test_args, line);
      } else {
        passed = subject.truthy();
      }
      if (passed == keep) out.push_back(item);
    }
    return out;
  }
  if (name == "map") {
    const Value attribute = args.get(99, "attribute");
    Array out;
    for (const Value& item : as_list(input, line)) {
      if (!attribute.is_undefined()) {
        out.push_back(attribute_of(item, attribute.str()));
      } else if (!args.positional.empty()) {
        CallArgs rest;
        rest.positional.assign(args.positional.begin() + 1, args.positional.end());
        out.push_back(apply_filter(args.positional[0].str(), item, rest, line));
      } else {
        fail_at(line, "filter 'map' needs a filter name or attribute=");
      }
    }
    return out;
  }
  if (name == "dictsort") {
    if (!input.is_object()) fail_at(line, "filter 'dictsort' needs a dict, got a " + input.type_name());
    const bool case_sensitive = args.get(0, "case_sensitive", Value(false)).truthy();
    const bool by_value = args.get(1, "by", Value("key")).str() == "value";
    const bool reverse = args.get(2, "reverse", Value(false)).truthy();
    Array out;
    for (const auto& [k, v] : input.object().items) out.emplace_back(Array{Value(k), v});
    std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
      const size_t at = by_value ? 1 : 0;
      return reverse ? sort_less(b.array()[at], a.array()[at], case_sensitive)
                     : sort_less(a.array()[at], b.array()[at], case_sensitive);
    });
    return out;
  }
  if (name == "sort" || name == "min" || name == "max") {
    const bool is_sort = name == "sort";
    const bool reverse = is_sort && args.get(0, "reverse", Value(false)).truthy();
    const bool case_sensitive = args.get(is_sort ? 1 : 0, "case_sensitive", Value(false)).truthy();
    const Value attribute = args.get(is_sort ? 2 : 1, "attribute");
    Array items = as_list(input, line);
    auto key = [&](const Value& v) { return attribute.is_undefined() ? v : attribute_of(v, attribute.str()); };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return reverse ? sort_less(key(b), key(a), case_sensitive) : sort_less(key(a), key(b), case_sensitive);
    });
    if (is_sort) return items;
    if (items.empty()) return Value();  // Jinja: undefined for an empty sequence
    return name == "min" ? items.front() : items.back();
  }
  if (name == "indent") {
    const std::string pad(static_cast<size_t>(args.get(0, "width", Value(4)).as_int()), ' ');
    const bool first = args.get(1, "first", Value(false)).truthy();
    std::string out = first ? pad : "";
    for (char c : need_string()) {
      out += c;
      if (c == '\n') out += pad;
    }
    return out;
  }
  fail_at(line, "unknown filter '" + name + "'");
}

bool apply_test(const std::string& name, const Value& input, const CallArgs& args, int line) {
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "string") return input.is_string();
  if (name == "number") return input.is_number();
  if (name == "integer") return input.kind() == Value::Kind::integer;
  if (name == "float") return input.kind() == Value::Kind::floating;
  if (name == "boolean") return input.kind() == Value::Kind::boolean;
  if (name == "true") return input.kind() == Value::Kind::boolean && input.as_bool();
  if (name == "false") return input.kind() == Value::Kind::boolean && !input.as_bool();
  if (name == "mapping") return input.is_object();
  if (name == "sequence") return input.is_array() || input.is_string();
  if (name == "iterable") return input.is_array() || input.is_string() || input.is_object();
  if (name == "callable") return input.kind() == Value::Kind::function;
  if (name == "odd" || name == "even") {
    if (input.kind() != Value::Kind::integer) fail_at(line, "test '" + name + "' needs an integer");
    return (input.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") return input.as_int() % std::max<int64_t>(1, args.get(0, "num").as_int()) == 0;
  if (name == "equalto" || name == "eq" || name == "==") return input == args.get(0, "other");
  if (name == "ne" || name == "!=") return !(input == args.get(0, "other"));
  if (name == "in") {
    const Value container = args.get(0, "seq");
    if (container.is_array()) return std::find(container.array().begin(), container.array().end(), input) != container.array().end();
    if (container.is_string()) return input.is_string() && container.as_string().find(input.as_string()) != std::string::npos;
    return false;
  }
  fail_at(line, "unknown test '" + name + "'");
}

Value call_method(const Value& self, const std::string& name, CallArgs& args, int line, bool& found) {
  found = true;
  if (self.is_string()) {
    const std::string& s = self.as_string();
    const Value chars = args.get(0, "chars");
    const std::string strip_set = chars.is_string() ? chars.as_string() : whitespace;
    if (name == "strip") return strip(s, strip_set, true, true);
    if (name == "lstrip") return strip(s, strip_set, true, false);
    if (name == "rstrip") return strip(s, strip_set, false, true);
    if (name == "startswith") return starts_or_ends(s, args.get(0, "prefix"), true, line);
    if (name == "endswith") return starts_or_ends(s, args.get(0, "suffix"), false, line);
    if (name == "split") {
      const Value max_split = args.get(1, "maxsplit");
      return split(s, args.get(0, "sep"), max_split.is_number() ? max_split.as_int() : -1);
    }
    if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
      return apply_filter(name, self, args, line);
    }
    if (name == "replace") {
      const Value count = args.get(2, "count");
      return replace_all(s, args.get(0, "old").str(), args.get(1, "new").str(), count.is_number() ? count.as_int() : -1);
    }
    if (name == "format") return format_string(s, args, line);
    if (name == "find") {
      const size_t pos = s.find(args.get(0, "sub").str());
      return pos == std::string::npos ? Value(-1) : Value(static_cast<int64_t>(pos));
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const Value& item : as_list(args.get(0, "iterable"), line)) {
        out += (first ? "" : s) + item.str();
        first = false;
      }
      return out;
    }
  } else if (self.is_object()) {
    Object& obj = self.object();
    if (name == "items") return apply_filter("items", self, args, line);
    if (name == "keys" || name == "values") {
      Array out;
      for (const auto& [k, v] : obj.items) out.push_back(name == "keys" ? Value(k) : v);
      return out;
    }
    if (name == "get") {
      const Value* v = obj.find(args.get(0, "key").str());
      return v ? *v : args.get(1, "default", Value::none());
    }
  } else if (self.is_array()) {
    if (name == "append") {
      self.array().push_back(args.get(0, "item"));
      return Value::none();
    }
    if (name == "pop") {
      if (self.array().empty()) fail_at(line, "pop() from an empty list");
      Value last = self.array().back();
      self.array().pop_back();
      return last;
    }
  }
  found = false;
  return Value();
}

}  // namespace loom::jinja
