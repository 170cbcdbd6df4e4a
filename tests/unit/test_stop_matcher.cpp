// StopMatcher: stop strings across pieces, and llama.cpp's n_indent (a later line indented less
// than the cursor's ends a code completion), each piece released as soon as it is decided.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/stop_matcher.h"

namespace {

// Pushes each piece and returns what was released, piece by piece, then the flushed tail.
std::vector<std::string> run(loom::StopMatcher& matcher, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const auto& piece : pieces) out.push_back(matcher.push(piece));
  out.push_back(matcher.flush());
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string all;
  for (const auto& part : parts) all += part;
  return all;
}

}  // namespace

TEST_CASE("a stop string split across pieces ends the text before it", "[stop]") {
  loom::StopMatcher matcher({"```"});
  const auto out = run(matcher, {"a + b\n`", "``", "more"});
  CHECK(out[0] == "a + b\n");  // the backtick may start the stop string: held
  CHECK(joined(out) == "a + b\n");
  CHECK(matcher.stopped());
}

TEST_CASE("a line indented less than n_indent ends the completion before that line", "[stop]") {
  loom::StopMatcher matcher({}, 4);
  const auto out = run(matcher, {"a + b", "\n    c = 1\n", "  ", "  d = 2\n", "\nprint(x)\n"});
  CHECK(joined(out) == "a + b\n    c = 1\n    d = 2\n");  // the blank line has no indentation: it ends it
  CHECK(matcher.stopped());
  CHECK(out[2].empty());  // two spaces at a line start: undecided, held
}

TEST_CASE("n_indent never cuts the cursor's own line, and a line at the indentation continues", "[stop]") {
  loom::StopMatcher matcher({}, 4);
  const auto out = run(matcher, {"x = 1", "\n", "    return x", "\n", "print(x)"});
  CHECK(joined(out) == "x = 1\n    return x\n");
  CHECK(out[1] == "\n");  // a newline alone is released; its line is decided by what follows
  CHECK(matcher.stopped());
}

TEST_CASE("without stop strings or n_indent everything is released at once", "[stop]") {
  loom::StopMatcher matcher({}, 0);
  const auto out = run(matcher, {"a\n", "b\n", "c"});
  CHECK(out == std::vector<std::string>{"a\n", "b\n", "c", ""});
  CHECK_FALSE(matcher.stopped());
}

TEST_CASE("the earlier of a stop string and an under-indented line wins", "[stop]") {
  loom::StopMatcher first_string({"END"}, 4);
  CHECK(joined(run(first_string, {"a END\nb"})) == "a ");
  loom::StopMatcher first_line({"END"}, 4);
  CHECK(joined(run(first_line, {"a\nb END"})) == "a\n");
}
