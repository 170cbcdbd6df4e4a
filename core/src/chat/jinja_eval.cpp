#include "chat/jinja_eval.h"

#include <cmath>
#include <ctime>
#include <unordered_map>

#include "common/error.h"

namespace loom::jinja {
namespace {

enum class Flow { normal, break_, continue_ };

class Evaluator {
 public:
  explicit Evaluator(const Object& variables) {
    scopes_.emplace_back();
    auto& globals = scopes_.back();
    globals["range"] = Value::function([](CallArgs& a) {
      int64_t start = 0;
      int64_t stop = 0;
      int64_t step = 1;
      if (a.positional.size() == 1) {
        stop = a.positional[0].as_int();
      } else if (a.positional.size() >= 2) {
        start = a.positional[0].as_int();
        stop = a.positional[1].as_int();
        if (a.positional.size() >= 3) step = a.positional[2].as_int();
      }
      if (step == 0) throw Error("chat template: range() step must not be zero");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return Value(std::move(out));
    });
    globals["namespace"] = Value::function([](CallArgs& a) {
      Object ns;
      ns.is_namespace = true;
      for (auto& [k, v] : a.keyword) ns.set(k, v);
      return Value(std::move(ns));
    });
    globals["raise_exception"] = Value::function([](CallArgs& a) -> Value {
      throw Error("chat template raised an exception: " + a.get(0, "message").str());
    });
    globals["strftime_now"] = Value::function([](CallArgs& a) {
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof(buf), a.get(0, "format").str().c_str(), &local);
      return Value(std::string(buf, n));
    });
    for (const auto& [k, v] : variables.items) globals[k] = v;
  }

  std::string run(const Body& body) {
    std::string out;
    render_body(body, out);
    return out;
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value();
  }

  Flow render_body(const Body& body, std::string& out) {
    for (const auto& stmt : body) {
      const Flow flow = render_stmt(*stmt, out);
      if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
  }

  Flow render_stmt(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::text: out += s.text; return Flow::normal;
      case Stmt::Kind::output: out += eval(*s.expr).str(); return Flow::normal;
      case Stmt::Kind::if_:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond).truthy()) return render_body(body, out);
        }
        return render_body(s.else_body, out);
      case Stmt::Kind::for_: return render_for(s, out);
      case Stmt::Kind::set: assign(s, eval(*s.expr)); return Flow::normal;
      case Stmt::Kind::set_block: {
        std::string captured;
        render_body(s.body, captured);
        assign(s, Value(std::move(captured)));
        return Flow::normal;
      }
      case Stmt::Kind::macro: define_macro(s); return Flow::normal;
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
    }
    return Flow::normal;
  }

  void assign(const Stmt& s, Value value) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = std::move(value);
      return;
    }
    const Value target = lookup(s.targets[0]);
    if (!target.is_object() || !target.object().is_namespace) {
      fail_at(s.line, "cannot set '" + s.targets[0] + "." + s.targets[1] + "': '" + s.targets[0] +
                          "' is not a namespace() object");
    }
    target.object().set(s.targets[1], std::move(value));
  }

  Flow render_for(const Stmt& s, std::string& out) {
    const Value iterable = eval(*s.expr);
    Array items;
    if (iterable.is_array()) {
      items = iterable.array();
    } else if (iterable.is_object()) {
      for (const auto& item : iterable.object().items) items.emplace_back(item.first);
    } else if (iterable.is_string()) {
      for (char c : iterable.as_string()) items.emplace_back(std::string(1, c));
    } else if (!iterable.is_undefined() && !iterable.is_none()) {
      fail_at(s.line, "cannot loop over a " + iterable.type_name());
    }
    if (s.filter) {
      Array kept;
      for (const Value& item : items) {
        scopes_.emplace_back();
        bind_targets(s, item);
        if (eval(*s.filter).truthy()) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) return render_body(s.else_body, out);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      bind_targets(s, items[i]);
      Object loop;
      loop.set("index", i + 1);
      loop.set("index0", i);
      loop.set("revindex", n - i);
      loop.set("revindex0", n - i - 1);
      loop.set("first", i == 0);
      loop.set("last", i == n - 1);
      loop.set("length", n);
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i + 1 < n ? items[i + 1] : Value());
      scopes_.back()["loop"] = Value(std::move(loop));
      const Flow flow = render_body(s.body, out);
      scopes_.pop_back();
      if (flow == Flow::break_) break;
    }
    return Flow::normal;
  }

  void bind_targets(const Stmt& s, const Value& item) {
    if (s.targets.size() == 1) {
      scopes_.back()[s.targets[0]] = item;
      return;
    }
    if (!item.is_array() || item.array().size() != s.targets.size()) {
      fail_at(s.line, "cannot unpack a " + item.type_name() + " into " + std::to_string(s.targets.size()) + " loop variables");
    }
    for (size_t i = 0; i < s.targets.size(); ++i) scopes_.back()[s.targets[i]] = item.array()[i];
  }

  void define_macro(const Stmt& s) {
    const Stmt* macro = &s;
    scopes_.back()[s.targets[0]] = Value::function([this, macro](CallArgs& args) {
      scopes_.emplace_back();
      for (size_t i = 0; i < macro->params.size(); ++i) {
        const auto& [param, fallback] = macro->params[i];
        Value v = args.get(i, param);
        if (v.is_undefined() && fallback) v = eval(*fallback);
        scopes_.back()[param] = v;
      }
      std::string out;
      render_body(macro->body, out);
      scopes_.pop_back();
      return Value(std::move(out));
    });
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
    return args;
  }

  static int64_t normalize_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::literal: return e.value;
      case Expr::Kind::name: return lookup(e.name);
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        Array items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return items;
      }
      case Expr::Kind::dict: {
        Object obj;
        for (size_t i = 0; i < e.args.size(); ++i) obj.set(eval(*e.dict_keys[i]).str(), eval(*e.args[i]));
        return obj;
      }
      case Expr::Kind::get_attr: {
        const Value base = eval(*e.args[0]);
        if (base.is_object()) {
          const Value* v = base.object().find(e.name);
          return v ? *v : Value();
        }
        if (base.is_undefined() || base.is_none()) {
          fail_at(e.line, "cannot read attribute '" + e.name + "' of " + (base.is_none() ? "None" : "an undefined value"));
        }
        return Value();
      }
      case Expr::Kind::get_item: return get_item(e, eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::slice: return slice(e);
      case Expr::Kind::call: return call(e);
      case Expr::Kind::filter: {
        const Value input = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, input, args, e.line);
      }
      case Expr::Kind::test: {
        const Value input = eval(*e.args[0]);
        const CallArgs args = eval_args(e, 1);
        return apply_test(e.name, input, args, e.line) != e.negated;
      }
      case Expr::Kind::unary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return !v.truthy();
        if (!v.is_number()) fail_at(e.line, "unary '" + e.name + "' needs a number, got a " + v.type_name());
        if (e.name == "+") return v;
        return v.kind() == Value::Kind::integer ? Value(-v.as_int()) : Value(-v.as_float());
      }
      case Expr::Kind::binary: return binary(e);
      case Expr::Kind::conditional:
        if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value();
    }
    return Value();
  }

  Value get_item(const Expr& e, const Value& base, const Value& index) {
    if (base.is_object()) {
      const Value* v = base.object().find(index.str());
      return v ? *v : Value();
    }
    if (base.is_array() || base.is_string()) {
      if (index.kind() != Value::Kind::integer) fail_at(e.line, "a " + base.type_name() + " index must be an integer");
      const auto n = static_cast<int64_t>(base.is_array() ? base.array().size() : base.as_string().size());
      const int64_t i = normalize_index(index.as_int(), n);
      if (i < 0 || i >= n) return Value();
      if (base.is_array()) return base.array()[static_cast<size_t>(i)];
      return std::string(1, base.as_string()[static_cast<size_t>(i)]);
    }
    if (base.is_undefined() || base.is_none()) {
      fail_at(e.line, "cannot index " + std::string(base.is_none() ? "None" : "an undefined value") + " with [" +
                          index.repr() + "]");
    }
    fail_at(e.line, "cannot index a " + base.type_name());
  }

  Value slice(const Expr& e) {
    const Value base = eval(*e.args[0]);
    if (!base.is_array() && !base.is_string()) fail_at(e.line, "cannot slice a " + base.type_name());
    const auto n = static_cast<int64_t>(base.is_array() ? base.array().size() : base.as_string().size());
    const int64_t step = e.args[3] ? eval(*e.args[3]).as_int() : 1;
    if (step == 0) fail_at(e.line, "slice step must not be zero");
    const auto bound = [&](const ExprPtr& part, int64_t fallback) {
      if (!part) return fallback;
      int64_t i = normalize_index(eval(*part).as_int(), n);
      return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t start = bound(e.args[1], step > 0 ? 0 : n - 1);
    const int64_t stop = bound(e.args[2], step > 0 ? n : -1);
    Array items;
    std::string chars;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (base.is_array()) {
        items.push_back(base.array()[static_cast<size_t>(i)]);
      } else {
        chars += base.as_string()[static_cast<size_t>(i)];
      }
    }
    return base.is_array() ? Value(std::move(items)) : Value(std::move(chars));
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    CallArgs args;
    if (callee.kind == Expr::Kind::get_attr) {
      const Value self = eval(*callee.args[0]);
      const Value* member = self.is_object() ? self.object().find(callee.name) : nullptr;
      if (!member || member->kind() != Value::Kind::function) {
        args = eval_args(e, 1);
        bool found = false;
        Value result = call_method(self, callee.name, args, e.line, found);
        if (!found) fail_at(e.line, "a " + self.type_name() + " has no method '" + callee.name + "'");
        return result;
      }
    }
    const Value fn = eval(callee);
    if (fn.kind() != Value::Kind::function) {
      const std::string what = callee.kind == Expr::Kind::name ? "'" + callee.name + "'" : "this " + fn.type_name();
      fail_at(e.line, what + " is not a function" + (fn.is_undefined() ? " (it is undefined)" : ""));
    }
    args = eval_args(e, 1);
    return fn.fn()(args);
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value l = eval(*e.args[0]);
      return l.truthy() ? eval(*e.args[1]) : l;
    }
    if (op == "or") {
      Value l = eval(*e.args[0]);
      return l.truthy() ? l : eval(*e.args[1]);
    }
    const Value l = eval(*e.args[0]);
    const Value r = eval(*e.args[1]);
    if (op == "~") return l.str() + r.str();
    if (op == "==") return l == r;
    if (op == "!=") return !(l == r);
    if (op == "in" || op == "not in") {
      bool found = false;
      if (r.is_string()) {
        if (!l.is_string()) fail_at(e.line, "'in <string>' needs a string on the left, got a " + l.type_name());
        found = r.as_string().find(l.as_string()) != std::string::npos;
      } else if (r.is_array()) {
        for (const Value& item : r.array()) found = found || item == l;
      } else if (r.is_object()) {
        found = r.object().find(l.str()) != nullptr;
      } else if (!r.is_undefined() && !r.is_none()) {
        fail_at(e.line, "cannot test membership in a " + r.type_name());
      }
      return found == (op == "in");
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int cmp = 0;
      if (l.is_number() && r.is_number()) {
        cmp = l.as_float() < r.as_float() ? -1 : l.as_float() > r.as_float() ? 1 : 0;
      } else if (l.is_string() && r.is_string()) {
        cmp = l.as_string().compare(r.as_string());
      } else {
        fail_at(e.line, "cannot compare a " + l.type_name() + " with a " + r.type_name() + " using '" + op + "'");
      }
      if (op == "<") return cmp < 0;
      if (op == "<=") return cmp <= 0;
      if (op == ">") return cmp > 0;
      return cmp >= 0;
    }
    if (op == "+") {
      if (l.is_string() && r.is_string()) return l.as_string() + r.as_string();
      if (l.is_array() && r.is_array()) {
        Array joined = l.array();
        joined.insert(joined.end(), r.array().begin(), r.array().end());
        return joined;
      }
    }
    if (op == "*" && l.is_string() && r.kind() == Value::Kind::integer) {
      std::string out;
      for (int64_t i = 0; i < r.as_int(); ++i) out += l.as_string();
      return out;
    }
    if (!l.is_number() || !r.is_number()) {
      fail_at(e.line, "cannot apply '" + op + "' to a " + l.type_name() + " and a " + r.type_name());
    }
    const bool ints = l.kind() == Value::Kind::integer && r.kind() == Value::Kind::integer;
    if (op == "+") return ints ? Value(l.as_int() + r.as_int()) : Value(l.as_float() + r.as_float());
    if (op == "-") return ints ? Value(l.as_int() - r.as_int()) : Value(l.as_float() - r.as_float());
    if (op == "*") return ints ? Value(l.as_int() * r.as_int()) : Value(l.as_float() * r.as_float());
    if (op == "**") return ints && r.as_int() >= 0 ? Value(static_cast<int64_t>(std::pow(l.as_int(), r.as_int())))
                                                   : Value(std::pow(l.as_float(), r.as_float()));
    if (r.as_float() == 0.0) fail_at(e.line, "division by zero");
    if (op == "/") return l.as_float() / r.as_float();
    if (op == "//") return ints ? Value(static_cast<int64_t>(std::floor(l.as_float() / r.as_float())))
                                : Value(std::floor(l.as_float() / r.as_float()));
    if (op == "%") {
      if (ints) {
        const int64_t m = l.as_int() % r.as_int();
        return (m != 0 && ((m < 0) != (r.as_int() < 0))) ? m + r.as_int() : m;
      }
      return std::fmod(l.as_float(), r.as_float());
    }
    fail_at(e.line, "unknown operator '" + op + "'");
  }

  std::vector<Scope> scopes_;
};

}  // namespace

std::string render(const Body& body, const Object& variables) { return Evaluator(variables).run(body); }

}  // namespace loom::jinja
