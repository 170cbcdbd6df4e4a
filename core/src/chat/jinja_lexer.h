// Jinja lexer: template text -> tokens. Whitespace control is resolved here: {%- -%} / {{- -}},
// and trim_blocks + lstrip_blocks, which Hugging Face enables for every chat template.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::jinja {

struct Token {
  enum class Kind {
    text,         // literal template text
    var_begin,    // {{
    var_end,      // }}
    block_begin,  // {%
    block_end,    // %}
    name,
    string,
    integer,
    floating,
    op,           // operators and punctuation: + - * / // % ~ == != < <= > >= = ( ) [ ] { } , . : |
    eof,
  };
  Kind kind;
  std::string text;
  int line;
};

// loom::Error "chat template: line N: ..." for unterminated tags, strings or unknown characters.
std::vector<Token> tokenize_template(std::string_view source);

}  // namespace loom::jinja
