// The fill-in-the-middle (FIM) tokens of a code model: prefix, suffix and middle mark where the code
// before and after the cursor go and where the model writes the part between them; repo and file
// separator tokens carry other files of the project as context (Qwen2.5-Coder's repository format).
// Found as llama.cpp finds them: the GGUF keys tokenizer.ggml.fim_*_token_id (or the older
// prefix/suffix/middle ones), else by the tokens' own text (Qwen, StarCoder, Granite, CodeLlama,
// DeepSeek-Coder, GLM-4.5; Codestral's [PREFIX]/[SUFFIX] puts the suffix first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace loom {

struct FimTokens {
  int32_t prefix = -1, suffix = -1, middle = -1;
  int32_t pad = -1, repo = -1, file_sep = -1;  // optional
  // Codestral (Mistral's format): [SUFFIX] suffix [PREFIX] prefix, then the middle, with no middle token.
  bool suffix_first = false;

  bool usable() const { return prefix >= 0 && suffix >= 0 && (middle >= 0 || suffix_first); }
  // What is missing, for the 400 a model without FIM gets ("" when usable).
  std::string missing() const;
  // Tokens that end a middle besides the model's end-of-generation ones (llama.cpp adds these).
  std::vector<int32_t> end_ids() const;
};

FimTokens find_fim_tokens(const gguf::GgufFile& file, const Tokenizer& tokenizer);

}  // namespace loom
