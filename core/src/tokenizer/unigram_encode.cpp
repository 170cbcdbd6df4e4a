#include "tokenizer/unigram_encode.h"

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace loom::tokenizer {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr double kUnknownPenalty = 10.0;               // below the worst piece, as SentencePiece scores it

// One node of the character map's double array (Kanda's XOR-compressed form, as SentencePiece packs it):
// BASE in bits 10-30 (shifted left 8 more when bit 9 is set), LCHECK in bits 0-7, LEAF in bit 8; a
// value node (bit 31) holds an offset into the replacements.
uint32_t node_base(uint32_t node) { return (node >> 10) << ((node & (1u << 9)) >> 6); }
uint32_t node_check(uint32_t node) { return node & ((1u << 31) | 0xFFu); }
bool node_leaf(uint32_t node) { return ((node >> 8) & 1u) != 0; }
uint32_t node_value(uint32_t node) { return node & ((1u << 31) - 1); }

struct Best {
  int32_t token = -1;
  size_t start = 0;
  double score = -DBL_MAX;
};

}  // namespace

void UnigramModel::Trie::insert(std::string_view text, int32_t id) {
  int32_t node = 0;
  for (const char c : text) {
    const uint64_t key = (uint64_t(uint32_t(node)) << 8) | uint8_t(c);
    auto it = child.find(key);
    if (it == child.end()) {
      it = child.emplace(key, int32_t(value.size())).first;
      value.push_back(-1);
    }
    node = it->second;
  }
  if (value[size_t(node)] < 0) value[size_t(node)] = id;  // the first id of a duplicated piece wins
}

UnigramModel::UnigramModel(const Vocab& vocab) : vocab_(vocab) {
  const std::vector<uint8_t>& map = vocab.data.precompiled_charsmap;
  if (!map.empty()) {
    uint32_t blob = 0;
    if (map.size() >= 4) std::memcpy(&blob, map.data(), 4);
    if (map.size() < 4 || blob % 4 != 0 || blob > map.size() - 4)
      throw Error("tokenizer: tokenizer.ggml.precompiled_charsmap is malformed (its double array of " + std::to_string(blob) +
                  " bytes does not fit " + std::to_string(map.size()) + " bytes)");
    double_array_.resize(blob / 4);
    std::memcpy(double_array_.data(), map.data() + 4, blob);
    replacements_ = std::string_view(reinterpret_cast<const char*>(map.data()) + 4 + blob, map.size() - 4 - blob);
  }
  if (vocab.data.unk_id < 0) throw Error("tokenizer: a unigram (t5) vocabulary needs an unknown token (tokenizer.ggml.unknown_token_id)");
  double min_score = DBL_MAX;
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenType type = vocab.type(id);
    const std::string& text = vocab.data.tokens[size_t(id)];
    if (type == TokenType::normal && size_t(id) < vocab.data.scores.size()) min_score = std::min(min_score, double(vocab.data.scores[size_t(id)]));
    if (type == TokenType::normal || type == TokenType::user_defined || type == TokenType::unused) pieces_.insert(text, id);
    if (type == TokenType::user_defined) user_defined_.insert(text, id);
  }
  unknown_score_ = (min_score == DBL_MAX ? 0.0 : min_score) - kUnknownPenalty;
}

std::string_view UnigramModel::normalize_prefix(std::string_view text, size_t offset, size_t& consumed) const {
  // A user-defined token stays as written.
  size_t user_defined = 0;
  for (int32_t node = 0, i = 0; offset + size_t(i) < text.size(); ++i) {
    node = user_defined_.next(node, uint8_t(text[offset + size_t(i)]));
    if (node < 0) break;
    if (user_defined_.value[size_t(node)] >= 0) user_defined = size_t(i) + 1;
  }
  if (user_defined > 0) {
    consumed = user_defined;
    return text.substr(offset, user_defined);
  }
  // The longest prefix the character map replaces.
  size_t matched = 0;
  uint32_t replacement = 0;
  if (!double_array_.empty()) {
    auto at = [&](uint32_t index) {
      if (index >= double_array_.size()) throw Error("tokenizer: tokenizer.ggml.precompiled_charsmap points outside its double array");
      return double_array_[index];
    };
    uint32_t node = node_base(at(0));
    for (size_t i = offset; i < text.size() && text[i] != '\0'; ++i) {
      const auto c = uint8_t(text[i]);
      node ^= c;
      const uint32_t packed = at(node);
      if (node_check(packed) != c) break;
      node ^= node_base(packed);
      if (node_leaf(packed)) {
        matched = i - offset + 1;
        replacement = node_value(at(node));
      }
    }
  }
  if (matched > 0) {
    const size_t end = replacement < replacements_.size() ? replacements_.find('\0', replacement) : std::string_view::npos;
    if (end == std::string_view::npos) throw Error("tokenizer: tokenizer.ggml.precompiled_charsmap holds an unterminated replacement");
    consumed = matched;
    return replacements_.substr(replacement, end - replacement);
  }
  // Otherwise one character as it is, or U+FFFD for a byte that starts no valid UTF-8 sequence.
  const size_t length = std::min(utf8_sequence_length(uint8_t(text[offset])), text.size() - offset);
  if (is_valid_utf8(text.substr(offset, length)) && utf8_complete_prefix(text.substr(offset, length)) == length) {
    consumed = length;
    return text.substr(offset, length);
  }
  consumed = 1;
  return "\xEF\xBF\xBD";
}

std::string UnigramModel::normalize(std::string_view text) const {
  std::string mapped;
  mapped.reserve(text.size());
  for (size_t offset = 0, consumed = 0; offset < text.size(); offset += consumed) mapped += normalize_prefix(text, offset, consumed);

  const bool prefix = vocab_.data.add_space_prefix, collapse = vocab_.data.remove_extra_whitespaces;
  std::string out;
  out.reserve(mapped.size() * 3 / 2 + 3);
  if (vocab_.data.metaspace) {
    // tokenizers: Replace(" {2,}", " ") when collapsing, then Metaspace (spaces as U+2581, the prefix
    // where the text does not start with one).
    for (size_t i = 0; i < mapped.size(); ++i) {
      if (mapped[i] != ' ') {
        out += mapped[i];
      } else if (!(collapse && i > 0 && mapped[i - 1] == ' ')) {
        out += kSpace;
      }
    }
    if (prefix && !std::string_view(out).starts_with(kSpace)) out.insert(0, kSpace);
    return out;
  }
  // SentencePiece: with remove_extra_whitespaces the ends are stripped and runs collapse; the prefix
  // goes before the first word.
  bool in_word = false, prefixed = false;
  for (const char c : mapped) {
    if (c != ' ') {
      if (!in_word) {
        in_word = true;
        if ((prefix && !prefixed) || collapse) out += kSpace;
        prefixed = true;
      }
      out += c;
    } else {
      in_word = false;
      if (!collapse) out += kSpace;
    }
  }
  return out;
}

void UnigramModel::segment(std::string_view text, std::vector<int32_t>& out) const {
  const size_t n = text.size();
  if (n == 0) return;
  std::vector<Best> best(n + 1);
  best[0].score = 0.0;
  for (size_t offset = 0; offset < n;) {
    const size_t char_length = std::min(utf8_sequence_length(uint8_t(text[offset])), n - offset);
    bool whole_character = false;
    for (int32_t node = 0, end = int32_t(offset); size_t(end) < n;) {
      node = pieces_.next(node, uint8_t(text[size_t(end++)]));
      if (node < 0) break;
      const int32_t id = pieces_.value[size_t(node)];
      if (id < 0) continue;
      if (size_t(end) - offset == char_length) whole_character = true;
      // User-defined pieces score 0, above every normal piece's log-probability.
      const double score = best[offset].score + (vocab_.type(id) == TokenType::user_defined ? 0.0 : double(vocab_.data.scores[size_t(id)]));
      if (score > best[size_t(end)].score) best[size_t(end)] = {id, offset, score};
    }
    if (!whole_character) {
      const double score = best[offset].score + unknown_score_;
      if (score > best[offset + char_length].score) best[offset + char_length] = {vocab_.data.unk_id, offset, score};
    }
    offset += char_length;
  }
  // Back from the end; a run of unknown characters is one unknown token (or, with byte fallback, the
  // bytes of the run when every one has a token).
  std::vector<int32_t> reversed;
  for (size_t end = n; end > 0;) {
    const Best& b = best[end];
    size_t start = b.start;
    if (b.token == vocab_.data.unk_id) {
      while (start > 0 && best[start].token == vocab_.data.unk_id) start = best[start].start;
      std::vector<int32_t> bytes;
      if (vocab_.data.byte_fallback) {
        for (size_t i = start; i < end && vocab_.byte_ids[uint8_t(text[i])] >= 0; ++i) bytes.push_back(vocab_.byte_ids[uint8_t(text[i])]);
        if (bytes.size() != end - start) bytes.clear();
      }
      if (bytes.empty()) reversed.push_back(b.token);
      else reversed.insert(reversed.end(), bytes.rbegin(), bytes.rend());
    } else {
      reversed.push_back(b.token);
    }
    end = start;
  }
  out.insert(out.end(), reversed.rbegin(), reversed.rend());
}

void UnigramModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = normalize(text);
  if (!vocab_.data.metaspace) return segment(normalized, out);
  // tokenizers' Metaspace splits before each U+2581: every word is segmented alone.
  const std::string_view all(normalized);
  size_t begin = 0;
  for (size_t at = all.find(kSpace, kSpace.size()); at != std::string_view::npos; at = all.find(kSpace, at + kSpace.size())) {
    segment(all.substr(begin, at - begin), out);
    begin = at;
  }
  segment(all.substr(begin), out);
}

}  // namespace loom::tokenizer
