// What `strict: true` promises for a JSON schema: every keyword in it is enforced by the grammar, so
// every output validates. xgrammar (0.2.9) enforces most of JSON Schema but drops some keywords
// silently (not, if/then/else, uniqueItems, multipleOf on numbers or beside a one-sided range, ...)
// and ignores the siblings of $ref, enum and anyOf. prepare_strict_schema() rewrites what it can into
// a form xgrammar enforces exactly, and refuses the rest with a loom::Error naming the keyword and
// its JSON pointer, which the server turns into a 400. docs/server.md lists the keywords.
#pragma once

#include <string>

namespace loom {

// The schema (JSON text) as xgrammar should compile it. Rewrites, each keeping the set of valid
// outputs a subset of the schema's (so outputs still validate):
//   - a pattern (JSON Schema: a match anywhere) becomes a whole-string regex, as xgrammar matches;
//   - a number with an integral multipleOf becomes an integer with that multipleOf.
// loom::Error for a keyword the grammar would not enforce, naming it and where it is.
std::string prepare_strict_schema(const std::string& schema_text);

}  // namespace loom
