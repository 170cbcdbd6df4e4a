// Fill-in-the-middle prompts: the code before the cursor, the code after it and, optionally, other
// files of the project, laid out with the model's FIM tokens (tokenizer/fim_tokens.h) as llama.cpp's
// /infill lays them out:
//   [repo]myproject\n [file_sep]NAME\n TEXT ... [file_sep]filename\n
//   [prefix] PREFIX PROMPT [suffix] SUFFIX [middle]          (Codestral: [suffix] SUFFIX [prefix] PREFIX PROMPT)
// The other files are context the model can do without: when the context is short, the ones nearest
// the prompt are kept and the rest dropped (the prefix and suffix are never cut).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/fim_tokens.h"
#include "tokenizer/tokenizer.h"

namespace loom::server {

struct FimFile {
  std::string filename;
  std::string text;
};

struct FimInput {
  std::string prefix;   // code before the cursor
  std::string suffix;   // code after it
  std::string prompt;   // llama.cpp's /infill "prompt": text the middle starts with
  std::vector<FimFile> files;  // other files of the project (llama.cpp's input_extra), oldest first
};

// The prompt's token ids; the extra files' tokens are cut from the front to fit within `budget`
// tokens in all (prefix and suffix always whole).
std::vector<int32_t> fim_prompt(const Tokenizer& tok, const FimTokens& fim, const FimInput& input, int64_t budget);

}  // namespace loom::server
