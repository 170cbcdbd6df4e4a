// Issue 34: what the JSON grammars admit, byte by byte, on a synthetic vocabulary that has a token for
// every single byte: numbers stop at int64/double digits, separators take exactly one space, strings
// stay valid UTF-8, an empty grammar is refused at compile time; and what strict schemas become.
#include <catch2/catch.hpp>

#include <map>

#include "common/error.h"
#include "engine/grammar_constraint.h"
#include "engine/json_schema_strict.h"
#include "gguf/gguf_file.h"
#include "test_model_helpers.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Vocabulary {
  std::unique_ptr<loom::Tokenizer> tokenizer;
  std::map<unsigned char, int32_t> byte_token;  // a token whose piece is exactly that byte
};

const Vocabulary& vocabulary() {
  static const Vocabulary v = [] {
    Vocabulary out;
    const auto path = loom::test::write_small_model(loom::test::small_spec("llama"), "grammar-bounds");
    out.tokenizer = loom::Tokenizer::from_gguf(loom::gguf::GgufFile::open(path));
    for (int32_t id = 0; id < out.tokenizer->n_vocab(); ++id) {
      const std::string piece = out.tokenizer->token_to_piece(id, false);
      if (piece.size() == 1 && !out.byte_token.count(static_cast<unsigned char>(piece[0]))) {
        out.byte_token[static_cast<unsigned char>(piece[0])] = id;
      }
    }
    return out;
  }();
  return v;
}

const loom::ConstraintCompiler& compiler() {
  static const loom::ConstraintCompiler c(*vocabulary().tokenizer, vocabulary().tokenizer->n_vocab());
  return c;
}

// How many bytes of `text` the grammar accepts, one single-byte token at a time.
size_t accepted_prefix(const loom::GrammarSpec& spec, const std::string& text) {
  loom::ConstraintMatcher matcher(compiler().compile(spec));
  const int32_t n_vocab = vocabulary().tokenizer->n_vocab();
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t token = vocabulary().byte_token.at(static_cast<unsigned char>(text[i]));
    bool any = false;
    const uint32_t* allowed = matcher.allowed_tokens(n_vocab, &any);
    if (!((allowed[token / 32] >> (token % 32)) & 1u) || !matcher.accept(token)) return i;
  }
  return text.size();
}

loom::GrammarSpec schema(const std::string& text) { return {loom::GrammarSpec::Kind::json_schema, text, {}}; }

}  // namespace

TEST_CASE("grammar: JSON numbers stop at the digits an int64 or a double needs", "[grammar]") {
  if (!loom::structured_output_available()) return;
  const std::string nineteen = "9223372036854775807";
  CHECK(accepted_prefix(schema(R"({"type": "integer"})"), nineteen) == nineteen.size());
  CHECK(accepted_prefix(schema(R"({"type": "integer"})"), nineteen + "0") == nineteen.size());
  CHECK(accepted_prefix(schema(R"({"type": "number"})"), "-12.5e-12") == 9);
  CHECK(accepted_prefix(schema(R"({"type": "number"})"), "1e999") == 4);  // a 3-digit exponent passes a double's range
  // Inside any JSON object too, where every value is a number (17 digits before the point).
  const loom::GrammarSpec object{loom::GrammarSpec::Kind::json_object, "", {}};
  const std::string long_value = R"({"a": )" + std::string(18, '9');
  CHECK(accepted_prefix(object, long_value) == long_value.size() - 1);
}

TEST_CASE("grammar: JSON takes exactly one space after ',' and ':' and none elsewhere", "[grammar]") {
  if (!loom::structured_output_available()) return;
  const loom::GrammarSpec object{loom::GrammarSpec::Kind::json_object, "", {}};
  const std::string good = R"({"a": [1, 2], "b": null})";
  CHECK(accepted_prefix(object, good) == good.size());
  CHECK(accepted_prefix(object, R"({"a":1})") == 5);    // no space after ':'
  CHECK(accepted_prefix(object, R"({"a":  1})") == 6);  // a second space
  CHECK(accepted_prefix(object, "{\n") == 1);
}

TEST_CASE("grammar: strings stay valid UTF-8 though xgrammar admits surrogates", "[grammar]") {
  if (!loom::structured_output_available()) return;
  const auto text = schema(R"({"type": "string"})");
  CHECK(accepted_prefix(text, "\"\xe2\x96\x81x\"") == 6);  // U+2581
  CHECK(accepted_prefix(text, "\"\xed\xa0\x80\"") == 2);   // a UTF-16 surrogate's encoding: refused at A0
  CHECK(accepted_prefix(text, "\"\xe0\x80\x80\"") == 2);   // an overlong form: refused at the first 80
}

TEST_CASE("grammar: a grammar that admits no output is refused when it compiles", "[grammar]") {
  if (!loom::structured_output_available()) return;
  CHECK_THROWS_WITH(compiler().compile({loom::GrammarSpec::Kind::regex, "[^\\s\\S]", {}}),
                    Catch::Contains("admits no output"));
  CHECK_NOTHROW(compiler().compile({loom::GrammarSpec::Kind::regex, "a[^\\s\\S]", {}}));  // dies only after "a"
}

TEST_CASE("strict schema: keywords the grammar would drop are refused by name and JSON pointer", "[grammar]") {
  CHECK_THROWS_WITH(loom::prepare_strict_schema(R"({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}}})"),
                    Catch::Contains("keyword 'multipleOf' at #/properties/n "));
  CHECK_THROWS_WITH(loom::prepare_strict_schema(R"({"type": "array", "items": {"$ref": "#/$defs/x", "minimum": 1}, "$defs": {"x": {"type": "integer"}}})"),
                    Catch::Contains("keyword 'minimum' at #/items "));
  CHECK_THROWS_WITH(loom::prepare_strict_schema(R"({"oneOf": [{"type": "integer"}]})"), Catch::Contains("'oneOf' at # "));
  CHECK_THROWS_WITH(loom::prepare_strict_schema(R"({"type": "string", "nullable": true})"), Catch::Contains("'nullable' at # "));
}

TEST_CASE("strict schema: rewrites keep JSON Schema's meaning in the grammar engine's terms", "[grammar]") {
  // A pattern matches anywhere; the grammar engine matches it whole.
  CHECK(loom::prepare_strict_schema(R"({"type": "string", "pattern": "ab"})") == R"({"type":"string","pattern":".*ab.*"})");
  CHECK(loom::prepare_strict_schema(R"({"type": "string", "pattern": "^ab$"})") == R"({"type":"string","pattern":"^ab$"})");
  CHECK(loom::prepare_strict_schema(R"({"type": "string", "pattern": "a|b"})") == R"({"type":"string","pattern":".*(a|b).*"})");
  // A number with a whole multipleOf is written as an integer, its bounds rounded inward.
  CHECK(loom::prepare_strict_schema(R"({"type": "number", "multipleOf": 5, "minimum": 0.5, "exclusiveMaximum": 100})") ==
        R"({"type":"integer","multipleOf":5,"minimum":1,"maximum":99})");
  // Lengths become a regex over whole characters.
  CHECK(loom::prepare_strict_schema(R"({"type": "string", "minLength": 2, "maxLength": 4})") ==
        R"({"type":"string","pattern":"^.{2,4}$"})");
}
