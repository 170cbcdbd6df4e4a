// Syntax tree of a parsed Jinja template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace loom::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,      // value
    name,         // name
    list,         // [args...]
    tuple,        // (args...)
    dict,         // {kwargs keys: args values}
    get_attr,     // args[0] . name
    get_item,     // args[0] [ args[1] ]
    slice,        // args[0] [ args[1] : args[2] : args[3] ] (null ExprPtr for omitted parts)
    call,         // args[0] ( args[1..], kwargs )
    filter,       // args[0] | name ( args[1..], kwargs )
    test,         // args[0] is [not] name ( args[1..] )
    unary,        // name in {"not", "-", "+"} applied to args[0]
    binary,       // args[0] name args[1]; name is the operator ("and", "in", "not in", "~", ...)
    conditional,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::literal;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<ExprPtr> dict_keys;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { text, output, if_, for_, set, set_block, break_, continue_, macro };
  Kind kind = Kind::text;
  int line = 0;
  std::string text;                      // text: literal output
  ExprPtr expr;                          // output, set value, for iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif conditions and bodies
  Body body;                             // for body, set_block body, macro body
  Body else_body;                        // if else, for else
  std::vector<std::string> targets;      // for loop variables; set target ("ns.attr" as {"ns", "attr"})
  ExprPtr filter;                        // for ... if filter
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters with defaults (may be null)
};

// loom::Error "chat template: line N: ..." naming what was expected.
Body parse_template(std::string_view source);

}  // namespace loom::jinja
