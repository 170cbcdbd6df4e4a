#include "engine/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

#if LOOM_HAVE_XGRAMMAR
#include <xgrammar/xgrammar.h>
#endif

namespace loom {

#if LOOM_HAVE_XGRAMMAR

class CompiledConstraint {
 public:
  explicit CompiledConstraint(xgrammar::CompiledGrammar grammar) : grammar(std::move(grammar)) {}
  xgrammar::CompiledGrammar grammar;
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

}  // namespace

bool structured_output_available() { return true; }

struct ConstraintCompiler::Impl {
  std::unique_ptr<xgrammar::GrammarCompiler> compiler;
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
  impl_->compiler = std::make_unique<xgrammar::GrammarCompiler>(info, /*max_threads=*/2);
}

ConstraintCompiler::~ConstraintCompiler() = default;

std::shared_ptr<const CompiledConstraint> ConstraintCompiler::compile(const GrammarSpec& spec) const {
  try {
    switch (spec.kind) {
      case GrammarSpec::Kind::json_object:
        return std::make_shared<CompiledConstraint>(impl_->compiler->CompileBuiltinJSONGrammar());
      case GrammarSpec::Kind::json_schema:
        // Compact JSON: with any whitespace allowed, a small model can pad with newlines until
        // max_tokens and never close the object.
        return std::make_shared<CompiledConstraint>(impl_->compiler->CompileJSONSchema(spec.text, /*any_whitespace=*/false));
      case GrammarSpec::Kind::regex:
        return std::make_shared<CompiledConstraint>(impl_->compiler->CompileRegex(spec.text));
      case GrammarSpec::Kind::ebnf:
        return std::make_shared<CompiledConstraint>(impl_->compiler->CompileGrammar(spec.text, "root"));
      case GrammarSpec::Kind::choice: {
        if (spec.choices.empty()) throw Error("the choice list is empty");
        std::string grammar = "root ::= ";
        for (size_t i = 0; i < spec.choices.size(); ++i) grammar += (i ? " | " : "") + ebnf_literal(spec.choices[i]);
        return std::make_shared<CompiledConstraint>(impl_->compiler->CompileGrammar(grammar, "root"));
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(first_line(e.what()));
  }
  throw Error("unknown grammar kind");
}

struct ConstraintMatcher::Impl {
  std::shared_ptr<const CompiledConstraint> grammar;
  xgrammar::GrammarMatcher matcher;
  std::vector<int32_t> bitmask;
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
  *any = std::any_of(impl_->bitmask.begin(), impl_->bitmask.end(), [](int32_t w) { return w != 0; });
  return reinterpret_cast<const uint32_t*>(impl_->bitmask.data());
}

bool ConstraintMatcher::accept(int32_t token) { return impl_->matcher.AcceptToken(token); }

bool ConstraintMatcher::is_terminated() const { return impl_->matcher.IsTerminated(); }

void ConstraintMatcher::rollback(int n) {
  if (n > 0) impl_->matcher.Rollback(n);
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
