#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace loom::tokenizer {
namespace {

void check_id(int32_t id, int32_t n_tokens, const char* what) {
  if (id < -1 || id >= n_tokens) {
    throw Error(std::string("tokenizer: ") + what + " id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(n_tokens) + " tokens");
  }
}

bool is_special_type(TokenType type) {
  return type == TokenType::control || type == TokenType::user_defined || type == TokenType::unknown;
}

}  // namespace

Vocab::Vocab(VocabData vocab_data) : data(std::move(vocab_data)) {
  const auto n = static_cast<int64_t>(data.tokens.size());
  if (n == 0) throw Error("tokenizer: the vocabulary is empty (tokenizer.ggml.tokens has no entries)");
  if (n > INT32_MAX) throw Error("tokenizer: the vocabulary has more tokens than 32-bit ids can address");
  if (!data.scores.empty() && static_cast<int64_t>(data.scores.size()) != n) {
    throw Error("tokenizer: tokenizer.ggml.scores has " + std::to_string(data.scores.size()) + " entries but there are " +
                std::to_string(n) + " tokens");
  }
  if (!data.types.empty() && static_cast<int64_t>(data.types.size()) != n) {
    throw Error("tokenizer: tokenizer.ggml.token_type has " + std::to_string(data.types.size()) +
                " entries but there are " + std::to_string(n) + " tokens");
  }
  for (TokenType t : data.types) {
    if (static_cast<int32_t>(t) < 0 || static_cast<int32_t>(t) > 6) {
      throw Error("tokenizer: tokenizer.ggml.token_type holds unknown type " + std::to_string(static_cast<int32_t>(t)));
    }
  }
  const auto n_ids = static_cast<int32_t>(n);
  check_id(data.bos_id, n_ids, "BOS");
  check_id(data.eos_id, n_ids, "EOS");
  check_id(data.eot_id, n_ids, "EOT");
  check_id(data.eom_id, n_ids, "EOM");
  check_id(data.unk_id, n_ids, "unknown-token");
  check_id(data.pad_id, n_ids, "padding");
  check_id(data.sep_id, n_ids, "separator");
  if (data.kind == VocabKind::wpm && data.unk_id < 0) throw Error("tokenizer: a WordPiece vocabulary needs an unknown token");

  token_to_id.reserve(data.tokens.size());
  for (int32_t id = 0; id < n_ids; ++id) token_to_id.emplace(data.tokens[id], id);
  // gpt-oss's harmony vocabulary (o200k_harmony): a reply's message structure is part of its text,
  // so those tokens print like user-defined ones (llama.cpp does the same).
  const bool harmony = find("<|return|>") >= 0 && find("<|call|>") >= 0 && find("<|channel|>") >= 0;
  if (harmony && !data.types.empty()) {
    for (std::string_view text : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"}) {
      if (const int32_t id = find(text); id >= 0 && data.types[static_cast<size_t>(id)] == TokenType::control) {
        data.types[static_cast<size_t>(id)] = TokenType::user_defined;
      }
    }
  }

  merge_rank.reserve(data.merges.size());
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    const std::string& merge = data.merges[rank];
    if (merge.find(' ', 1) == std::string::npos) {
      throw Error("tokenizer: merge #" + std::to_string(rank) + " '" + merge + "' is not of the form 'left right'");
    }
    merge_rank.emplace(merge, static_cast<int32_t>(rank));
  }

  byte_ids.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    if (data.kind == VocabKind::wpm) {
      continue;  // WordPiece has no byte tokens: unknown words become the unknown token
    }
    if (data.kind == VocabKind::spm || data.kind == VocabKind::ugm) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids[b] = find(name);
      if (byte_ids[b] < 0 && data.kind == VocabKind::spm) byte_ids[b] = find(std::string(1, static_cast<char>(b)));
    } else {
      byte_ids[b] = find(byte_to_unicode(static_cast<uint8_t>(b)));
    }
  }

  for (int32_t id = 0; id < n_ids; ++id) {
    if (is_special_type(type(id)) && !data.tokens[id].empty()) special_ids.push_back(id);
  }
  std::stable_sort(special_ids.begin(), special_ids.end(),
                   [&](int32_t a, int32_t b) { return data.tokens[a].size() > data.tokens[b].size(); });

  // Chat models end a turn with a token other than EOS; generation must stop there too.
  for (int32_t id : {data.eos_id, data.eot_id, data.eom_id}) {
    if (id >= 0) eog_ids.push_back(id);
  }
  static constexpr std::string_view eog_texts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
      "<|end_of_text|>", "<｜end▁of▁sentence｜>", "<|return|>", "<|call|>",
  };
  for (std::string_view text : eog_texts) {
    const int32_t id = find(text);
    // In harmony <|end|> closes one message of a turn (the reasoning, then the answer): the turn ends
    // with <|return|>, or <|call|> after a tool call.
    if (harmony && text == "<|end|>") continue;
    if (id >= 0 && type(id) == TokenType::control &&
        std::find(eog_ids.begin(), eog_ids.end(), id) == eog_ids.end()) {
      eog_ids.push_back(id);
    }
  }
  // As llama.cpp does, the fill-in-the-middle pad, repository and file-separator tokens end any
  // generation too (whatever their type): a code model that writes one has finished the file it was
  // completing. Their texts are llama.cpp's (fim_tokens.cpp finds the same ones).
  static constexpr std::string_view fim_end_texts[] = {
      "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
  };
  for (std::string_view text : fim_end_texts) {
    const int32_t id = find(text);
    if (id >= 0 && std::find(eog_ids.begin(), eog_ids.end(), id) == eog_ids.end()) eog_ids.push_back(id);
  }
  if (harmony) {
    const int32_t end = find("<|end|>");
    if (end != data.eos_id) std::erase(eog_ids, end);
  }
}

int32_t Vocab::find_merge(std::string_view left, std::string_view right, std::string& key) const {
  key.clear();
  key.append(left).append(1, ' ').append(right);
  auto it = merge_rank.find(key);
  return it == merge_rank.end() ? -1 : it->second;
}

}  // namespace loom::tokenizer
