#include "server/fill_in_middle.h"

#include <algorithm>

namespace loom::server {

namespace {

void append(std::vector<int32_t>& out, const std::vector<int32_t>& more) { out.insert(out.end(), more.begin(), more.end()); }

// Plain text: code may spell a control token ("<|fim_pad|>" in a string) and must not become one.
std::vector<int32_t> text_tokens(const Tokenizer& tok, const std::string& text) { return tok.encode(text, false, false); }

}  // namespace

std::vector<int32_t> fim_prompt(const Tokenizer& tok, const FimTokens& fim, const FimInput& input, int64_t budget) {
  // Other files: Qwen2.5-Coder's repository format when the model has its tokens, else llama.cpp's
  // "--- snippet ---" separator between chunks.
  std::vector<int32_t> extra;
  if (fim.repo >= 0) {
    extra.push_back(fim.repo);
    append(extra, text_tokens(tok, "myproject\n"));
  }
  for (const FimFile& file : input.files) {
    if (fim.file_sep >= 0) {
      extra.push_back(fim.file_sep);
      append(extra, text_tokens(tok, (file.filename.empty() ? "tmp" : file.filename) + "\n"));
    } else {
      append(extra, text_tokens(tok, "\n\n--- snippet ---\n\n"));
    }
    append(extra, text_tokens(tok, file.text));
  }
  if (fim.file_sep >= 0) {
    extra.push_back(fim.file_sep);
    append(extra, text_tokens(tok, "filename\n"));
  }

  std::vector<int32_t> before = {fim.prefix}, after = {fim.suffix};
  append(before, text_tokens(tok, input.prefix));
  append(before, text_tokens(tok, input.prompt));
  append(after, text_tokens(tok, input.suffix));
  const std::vector<int32_t>& first = fim.suffix_first ? after : before;
  std::vector<int32_t> second = fim.suffix_first ? before : after;
  if (fim.middle >= 0) second.push_back(fim.middle);

  std::vector<int32_t> prompt;
  if (tok.add_bos() && tok.bos_id() >= 0) prompt.push_back(tok.bos_id());
  const int64_t room = budget - int64_t(prompt.size() + first.size() + second.size());
  const int64_t n_extra = std::clamp<int64_t>(room, 0, int64_t(extra.size()));
  prompt.insert(prompt.end(), extra.end() - n_extra, extra.end());  // the files nearest the prefix
  append(prompt, first);
  append(prompt, second);
  return prompt;
}

}  // namespace loom::server
