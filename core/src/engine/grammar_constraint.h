// Constrained decoding: a grammar (JSON schema, any JSON object, regex, a list of choices, or an
// EBNF grammar) turned into a per-step mask over the vocabulary, so every sampled token keeps the
// output inside the grammar. xgrammar's C++ core does the grammar work (cmake/LoomXgrammar.cmake);
// this file is Loom's face of it, and the only one that includes its headers.
//
// ConstraintCompiler: one per engine (it indexes the vocabulary once); compile() is thread-safe and
// caches, so the server's handler threads compile (and refuse bad grammars with a 400) before a
// request reaches the engine. ConstraintMatcher: one per sequence, used on the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom {

class Tokenizer;

struct GrammarSpec {
  enum class Kind { json_object, json_schema, regex, choice, ebnf };
  Kind kind = Kind::json_object;
  std::string text;                  // the schema (JSON text), regex or EBNF grammar
  std::vector<std::string> choices;  // Kind::choice: the output is exactly one of these
  // Kind::json_schema: every keyword must be enforced (json_schema_strict.h); one that would not be
  // is refused at compile().
  bool strict = false;
};

// Whether this build has structured output (xgrammar's sources were there at configure time).
bool structured_output_available();

class CompiledConstraint;  // opaque: a grammar compiled against one vocabulary

class ConstraintCompiler {
 public:
  // n_vocab: the model's logit count (may exceed the tokenizer's: padded embeddings).
  ConstraintCompiler(const Tokenizer& tokenizer, int32_t n_vocab);
  ~ConstraintCompiler();
  ConstraintCompiler(const ConstraintCompiler&) = delete;
  ConstraintCompiler& operator=(const ConstraintCompiler&) = delete;

  // loom::Error naming the problem when the grammar does not compile (a schema xgrammar cannot
  // satisfy, a regex or EBNF syntax error, an empty choice list), admits no output at all (a regex
  // such as [^\s\S]), or a strict schema holds a keyword the grammar would not enforce; also when
  // structured output is unavailable. JSON grammars bound their numbers (no more digits than an
  // int64 or a double needs) and their whitespace (one space after ',' and ':'), so a weak model
  // cannot spend max_tokens inside one value.
  std::shared_ptr<const CompiledConstraint> compile(const GrammarSpec& spec) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const CompiledConstraint> grammar);
  ~ConstraintMatcher();
  ConstraintMatcher(const ConstraintMatcher&) = delete;
  ConstraintMatcher& operator=(const ConstraintMatcher&) = delete;

  // Sets the logits of tokens the grammar does not allow next to -inf. False when it allows none
  // (the request cannot go on).
  bool mask_logits(float* logits, int32_t n_vocab);
  // The same as a bitmask (bit t of word t / 32 = token t allowed; [ceil(n_vocab / 32)] words, valid
  // until the next call), for sampler plugins that take one (ABI 1.3). *any: whether any bit is set.
  const uint32_t* allowed_tokens(int32_t n_vocab, bool* any);
  // Advances past `token`; false (state unchanged) when the grammar does not allow it.
  bool accept(int32_t token);
  // A stop token was accepted: the output is complete.
  bool is_terminated() const;
  // Undoes the last n accepted tokens (speculative drafts the target rejected).
  void rollback(int n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom
