#include "tokenizer/fim_tokens.h"

#include <initializer_list>
#include <string_view>

namespace loom {

namespace {

// The first of `keys` the file sets to a token id inside the vocabulary, else the first of `texts`
// the vocabulary holds; -1 when none.
int32_t find_one(const gguf::GgufFile& file, const Tokenizer& tok, std::initializer_list<std::string_view> keys,
                 std::initializer_list<std::string_view> texts) {
  for (std::string_view key : keys) {
    if (const auto id = file.get_int(key); id && *id >= 0 && *id < tok.n_vocab()) return static_cast<int32_t>(*id);
  }
  for (std::string_view text : texts) {
    if (const int32_t id = tok.find_token(text); id >= 0) return id;
  }
  return -1;
}

}  // namespace

std::string FimTokens::missing() const {
  std::string what;
  for (const auto& [id, name] : {std::pair{prefix, "prefix"}, std::pair{suffix, "suffix"}, std::pair{middle, "middle"}}) {
    if (id < 0 && !(suffix_first && std::string_view(name) == "middle")) what += (what.empty() ? "" : ", ") + std::string(name);
  }
  return what;
}

std::vector<int32_t> FimTokens::end_ids() const {
  std::vector<int32_t> ids;
  for (int32_t id : {pad, repo, file_sep}) {
    if (id >= 0) ids.push_back(id);
  }
  return ids;
}

FimTokens find_fim_tokens(const gguf::GgufFile& file, const Tokenizer& tok) {
  FimTokens fim;
  fim.prefix = find_one(file, tok, {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
                        {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
                         "<|prefix|>"});
  fim.suffix = find_one(file, tok, {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
                        {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
                         "<|suffix|>"});
  fim.middle = find_one(file, tok, {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
                        {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
                         "<|middle|>"});
  fim.pad = find_one(file, tok, {"tokenizer.ggml.fim_pad_token_id"}, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>"});
  fim.repo = find_one(file, tok, {"tokenizer.ggml.fim_rep_token_id"}, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  fim.file_sep = find_one(file, tok, {"tokenizer.ggml.fim_sep_token_id"}, {"<|file_sep|>"});
  if (fim.prefix < 0 && fim.suffix < 0) {
    // Mistral's control tokens (Codestral): the suffix goes first and the middle follows the prefix.
    const int32_t prefix = tok.find_token("[PREFIX]"), suffix = tok.find_token("[SUFFIX]");
    if (prefix >= 0 && suffix >= 0) {
      fim.prefix = prefix;
      fim.suffix = suffix;
      fim.middle = -1;  // mistral-common's FIM prompt ends with the prefix
      fim.suffix_first = true;
    }
  }
  return fim;
}

}  // namespace loom
