// Values of the Jinja subset chat templates use: Python-like semantics (truthiness, str(), ==),
// lists and dicts shared by reference like Python's, and callables for globals such as namespace().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom::jinja {

class Value;
using Array = std::vector<Value>;

// Insertion-ordered dict (templates print tojson in insertion order, as Python does).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): the one object `set ns.x = ...` may change
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, array, object, function };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);            // NOLINT(google-explicit-constructor): literals read naturally
  Value(int64_t i);         // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double f);          // NOLINT
  Value(std::string s);     // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  Value(Array a);           // NOLINT
  Value(Object o);          // NOLINT
  static Value function(Function fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return kind_ == Kind::floating ? static_cast<int64_t>(float_) : int_; }
  double as_float() const { return kind_ == Kind::integer ? static_cast<double>(int_) : float_; }
  const std::string& as_string() const { return string_; }
  Array& array() const { return *array_; }
  Object& object() const { return *object_; }
  const Function& fn() const { return *function_; }

  bool truthy() const;
  std::string str() const;         // what {{ value }} prints (Python's str(), None -> "None")
  std::string repr() const;        // Python repr, used inside printed lists/dicts
  std::string to_json(int indent, int depth = 0) const;  // json.dumps(ensure_ascii=False)
  std::string type_name() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  Kind kind_ = Kind::undefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string string_;
  std::shared_ptr<Array> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<Function> function_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Positional `index` or keyword `name`, else `fallback`.
  Value get(size_t index, const std::string& name, Value fallback = Value()) const;
};

}  // namespace loom::jinja
