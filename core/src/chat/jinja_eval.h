// Evaluates a parsed Jinja template against variables.
#pragma once

#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace loom::jinja {

// Renders `body` with `variables` (plus the globals range, namespace, raise_exception, strftime_now).
// loom::Error "chat template: line N: ..." on type errors, unknown filters/tests/methods, and for
// raise_exception(message) (the message is included).
std::string render(const Body& body, const Object& variables);

// Builtins, in jinja_builtins.cpp. `line` is for error messages.
Value apply_filter(const std::string& name, const Value& input, CallArgs& args, int line);
bool apply_test(const std::string& name, const Value& input, const CallArgs& args, int line);
// A method of a string, list or dict (`s.startswith('x')`); `found` false when there is none.
Value call_method(const Value& self, const std::string& name, CallArgs& args, int line, bool& found);

[[noreturn]] void fail_at(int line, const std::string& message);

}  // namespace loom::jinja
