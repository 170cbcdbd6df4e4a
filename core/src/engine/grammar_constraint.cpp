#include "engine/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "engine/json_schema_strict.h"
#include "engine/utf8_token_filter.h"
#include "tokenizer/tokenizer.h"

#if LOOM_HAVE_XGRAMMAR
#include <xgrammar/xgrammar.h>
#endif

namespace loom {

#if LOOM_HAVE_XGRAMMAR

class CompiledConstraint {
 public:
  CompiledConstraint(xgrammar::CompiledGrammar grammar, std::shared_ptr<const Utf8TokenFilter> utf8)
      : grammar(std::move(grammar)), utf8(std::move(utf8)) {}
  xgrammar::CompiledGrammar grammar;
  std::shared_ptr<const Utf8TokenFilter> utf8;
};

namespace {

// A string as an EBNF literal: quotes, backslashes and control characters escaped.
std::string ebnf_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char hex[] = "0123456789abcdef";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// xgrammar's messages can run to a backtrace and start with "[time] source.cc:line: "; the rest of
// the first line says what is wrong.
std::string first_line(const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));
  if (!line.empty() && line.front() == '[') {
    const size_t source = line.find("] ");
    const size_t text = source == std::string::npos ? std::string::npos : line.find(": ", source);
    if (text != std::string::npos) line = line.substr(text + 2);
  }
  return line;
}

// xgrammar's JSON rules let a number grow without end ([1-9] [0-9]*), so a weak model can fill
// max_tokens with one integer. These replace them: an integer has at most int64's 19 digits; a number
// at most 17 digits before and after the point (a double's precision) and an exponent of 2 digits
// (3 would reach 1e999, past a double's range).
// Rules named here are those xgrammar 0.2.9 prints for its JSON grammars (grammar_constraint tests
// fail if a new version renames them); the rules they used to call stay behind, unused.
const char* const kBoundedIntegerRule = R"(basic_integer ::= "0" | "-"? [1-9] [0-9]{0,18})";
const char* const kBoundedNumberRule =
    R"(basic_number ::= "-"? ("0" | [1-9] [0-9]{0,16}) ("." [0-9]{1,17})? ([eE] [+\-]? [0-9]{1,2})?)";

// Replaces the line that defines `name` ("name ::= ...") with `definition`; nothing when no line does.
void replace_rule(std::string& ebnf, const std::string& name, const std::string& definition) {
  const std::string head = name + " ::= ";
  size_t at = ebnf.rfind(head, 0) == 0 ? 0 : ebnf.find("\n" + head);
  if (at == std::string::npos) return;
  if (at != 0) ++at;  // past the newline
  const size_t end = ebnf.find('\n', at);
  ebnf.replace(at, end == std::string::npos ? std::string::npos : end - at, definition);
}

xgrammar::Grammar bounded_json_grammar(const xgrammar::Grammar& grammar) {
  std::string ebnf = grammar.ToString();
  replace_rule(ebnf, "basic_integer", kBoundedIntegerRule);
  replace_rule(ebnf, "basic_number", kBoundedNumberRule);
  return xgrammar::Grammar::FromEBNF(ebnf, "root");
}

// A JSON grammar with one space after ',' and ':' and none elsewhere (vLLM's
// disable-any-whitespace): with any whitespace allowed, a small model can pad with newlines until
// max_tokens and never close the object.
xgrammar::Grammar json_schema_grammar(const std::string& schema) {
  return bounded_json_grammar(xgrammar::Grammar::FromJSONSchema(schema, /*any_whitespace=*/false));
}

}  // namespace

bool structured_output_available() { return true; }

struct ConstraintCompiler::Impl {
  std::unique_ptr<xgrammar::GrammarCompiler> compiler;
  std::shared_ptr<const Utf8TokenFilter> utf8;
  int32_t n_vocab = 0;
};

ConstraintCompiler::ConstraintCompiler(const Tokenizer& tokenizer, int32_t n_vocab) : impl_(std::make_unique<Impl>()) {
  // Each token as the bytes it produces; control tokens render as "", which xgrammar treats as
  // special (never allowed) unless they end generation.
  std::vector<std::string> vocab;
  vocab.reserve(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) vocab.push_back(tokenizer.token_to_piece(id, false));
  const auto& eog = tokenizer.end_of_generation_ids();
  xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, std::max(n_vocab, tokenizer.n_vocab()),
                               std::vector<int32_t>(eog.begin(), eog.end()), false);
  impl_->utf8 = std::make_shared<const Utf8TokenFilter>(vocab);
  impl_->compiler = std::make_unique<xgrammar::GrammarCompiler>(info, /*max_threads=*/2);
  impl_->n_vocab = std::max(n_vocab, tokenizer.n_vocab());
}

ConstraintCompiler::~ConstraintCompiler() = default;

namespace {

xgrammar::CompiledGrammar compile_spec(xgrammar::GrammarCompiler& compiler, const GrammarSpec& spec) {
  switch (spec.kind) {
    case GrammarSpec::Kind::json_object:
      // Any JSON object, as the schema {"type": "object"} allows it (xgrammar's built-in JSON
      // grammar has unbounded whitespace).
      return compiler.CompileGrammar(json_schema_grammar(R"({"type": "object"})"));
    case GrammarSpec::Kind::json_schema:
      return compiler.CompileGrammar(json_schema_grammar(spec.strict ? prepare_strict_schema(spec.text) : spec.text));
    case GrammarSpec::Kind::regex: return compiler.CompileRegex(spec.text);
    case GrammarSpec::Kind::ebnf: return compiler.CompileGrammar(spec.text, "root");
    case GrammarSpec::Kind::choice: {
      if (spec.choices.empty()) throw Error("the choice list is empty");
      std::string grammar = "root ::= ";
      for (size_t i = 0; i < spec.choices.size(); ++i) grammar += (i ? " | " : "") + ebnf_literal(spec.choices[i]);
      return compiler.CompileGrammar(grammar, "root");
    }
  }
  throw Error("unknown grammar kind");
}

// Whether some output satisfies the grammar: a first token it allows, or the empty output. A
// grammar such as the regex [^\s\S] compiles but admits nothing, and would fail its request at the
// first step instead of at admission.
bool admits_some_output(const xgrammar::CompiledGrammar& grammar, int32_t n_vocab) {
  xgrammar::GrammarMatcher matcher(grammar);
  if (matcher.IsCompleted()) return true;
  std::vector<int32_t> bitmask(static_cast<size_t>(xgrammar::GetBitmaskSize(n_vocab)), 0);
  int64_t shape[1] = {static_cast<int64_t>(bitmask.size())};
  DLTensor tensor{};
  tensor.data = bitmask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  matcher.FillNextTokenBitmask(&tensor);
  return std::any_of(bitmask.begin(), bitmask.end(), [](int32_t w) { return w != 0; });
}

}  // namespace

std::shared_ptr<const CompiledConstraint> ConstraintCompiler::compile(const GrammarSpec& spec) const {
  try {
    auto compiled = std::make_shared<CompiledConstraint>(compile_spec(*impl_->compiler, spec), impl_->utf8);
    if (!admits_some_output(compiled->grammar, impl_->n_vocab)) {
      throw Error("the grammar admits no output (no string, or none this model's tokens can write, matches it)");
    }
    return compiled;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(first_line(e.what()));
  }
}

struct ConstraintMatcher::Impl {
  std::shared_ptr<const CompiledConstraint> grammar;
  xgrammar::GrammarMatcher matcher;
  std::vector<int32_t> bitmask;
  // The output's UTF-8 state after each accepted token (back() = now), so rollback can step back.
  std::vector<Utf8TokenFilter::State> utf8_states{Utf8TokenFilter::kStart};
  explicit Impl(std::shared_ptr<const CompiledConstraint> g) : grammar(std::move(g)), matcher(grammar->grammar) {}
};

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> grammar)
    : impl_(std::make_unique<Impl>(std::move(grammar))) {}

ConstraintMatcher::~ConstraintMatcher() = default;

bool ConstraintMatcher::mask_logits(float* logits, int32_t n_vocab) {
  bool any = false;
  const uint32_t* allowed = allowed_tokens(n_vocab, &any);
  for (int32_t token = 0; token < n_vocab; ++token) {
    if (!((allowed[token / 32] >> (token % 32)) & 1u)) logits[token] = -std::numeric_limits<float>::infinity();
  }
  return any;
}

const uint32_t* ConstraintMatcher::allowed_tokens(int32_t n_vocab, bool* any) {
  const int32_t words = xgrammar::GetBitmaskSize(n_vocab);
  impl_->bitmask.assign(static_cast<size_t>(words), 0);
  int64_t shape[1] = {words};
  DLTensor tensor{};
  tensor.data = impl_->bitmask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  impl_->matcher.FillNextTokenBitmask(&tensor);
  // Bits past n_vocab (the last word's tail) are cleared so they never read as allowed.
  if (n_vocab % 32 != 0) impl_->bitmask.back() &= static_cast<int32_t>((1u << (n_vocab % 32)) - 1u);
  const auto& utf8 = impl_->grammar->utf8->allowed(impl_->utf8_states.back());
  for (size_t w = 0; w < std::min(utf8.size(), impl_->bitmask.size()); ++w) impl_->bitmask[w] &= static_cast<int32_t>(utf8[w]);
  *any = std::any_of(impl_->bitmask.begin(), impl_->bitmask.end(), [](int32_t w) { return w != 0; });
  return reinterpret_cast<const uint32_t*>(impl_->bitmask.data());
}

bool ConstraintMatcher::accept(int32_t token) {
  if (!impl_->matcher.AcceptToken(token)) return false;
  const auto next = impl_->grammar->utf8->after(impl_->utf8_states.back(), token);
  impl_->utf8_states.push_back(next == Utf8TokenFilter::kInvalid ? Utf8TokenFilter::kStart : next);
  return true;
}

bool ConstraintMatcher::is_terminated() const { return impl_->matcher.IsTerminated(); }

void ConstraintMatcher::rollback(int n) {
  if (n <= 0) return;
  impl_->matcher.Rollback(n);
  impl_->utf8_states.resize(std::max<size_t>(1, impl_->utf8_states.size() - static_cast<size_t>(n)));
}

#else  // built without xgrammar

class CompiledConstraint {};

bool structured_output_available() { return false; }

struct ConstraintCompiler::Impl {};
ConstraintCompiler::ConstraintCompiler(const Tokenizer&, int32_t) {}
ConstraintCompiler::~ConstraintCompiler() = default;
std::shared_ptr<const CompiledConstraint> ConstraintCompiler::compile(const GrammarSpec&) const {
  throw Error("this build of Loom has no structured output (xgrammar was not found at configure time; run "
              "scripts/setup.sh and rebuild)");
}

struct ConstraintMatcher::Impl {};
ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint>) {}
ConstraintMatcher::~ConstraintMatcher() = default;
bool ConstraintMatcher::mask_logits(float*, int32_t) { return true; }
const uint32_t* ConstraintMatcher::allowed_tokens(int32_t, bool* any) {
  *any = true;
  return nullptr;
}
bool ConstraintMatcher::accept(int32_t) { return true; }
bool ConstraintMatcher::is_terminated() const { return false; }
void ConstraintMatcher::rollback(int) {}

#endif

}  // namespace loom
