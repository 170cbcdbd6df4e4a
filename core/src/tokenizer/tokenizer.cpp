#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "tokenizer/merge_algorithms.h"
#include "tokenizer/unicode.h"

namespace loom {

using tokenizer::TokenType;
using tokenizer::VocabKind;

namespace {

// SentencePiece marks spaces with U+2581 LOWER ONE EIGHTH BLOCK.
constexpr std::string_view spm_space = "\xE2\x96\x81";

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += spm_space;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, spm_space.size(), spm_space) == 0) {
      out += ' ';
      i += spm_space.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string decode_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (uint32_t cp : tokenizer::utf8_to_codepoints(text)) {
    const int byte = tokenizer::unicode_to_byte(cp);
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      tokenizer::append_utf8(out, cp);  // not byte-level text (e.g. an added token): keep it as is
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(tokenizer::VocabData data) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(data)));
}

Tokenizer::Tokenizer(tokenizer::VocabData data) : vocab_(std::move(data)) {
  if (vocab_.data.kind == VocabKind::bpe) {
    if (vocab_.data.merges.empty()) throw Error("tokenizer: a gpt2 (BPE) vocabulary needs tokenizer.ggml.merges");
    pre_ = tokenizer::PreTokenizer::for_name(vocab_.data.pre);
  }
  if (vocab_.data.kind == VocabKind::ugm) unigram_ = std::make_unique<tokenizer::UnigramModel>(vocab_);
  special_lengths_by_byte_.resize(256);
  special_second_bytes_.assign(256, std::vector<bool>(256, false));
  for (size_t rank = 0; rank < vocab_.special_ids.size(); ++rank) {
    // Values are ranks in special_ids, whose order is the matching precedence.
    const std::string& text = vocab_.data.tokens[vocab_.special_ids[rank]];
    special_by_text_.emplace(text, static_cast<int32_t>(rank));
    auto& lengths = special_lengths_by_byte_[static_cast<uint8_t>(text[0])];
    if (text.size() >= 2) special_second_bytes_[static_cast<uint8_t>(text[0])][static_cast<uint8_t>(text[1])] = true;
    if (std::find(lengths.begin(), lengths.end(), text.size()) == lengths.end()) lengths.push_back(text.size());
  }
  for (auto& lengths : special_lengths_by_byte_) std::sort(lengths.rbegin(), lengths.rend());
}

// Splits special tokens out of the text with llama.cpp's precedence: longer token texts are taken
// first everywhere, then shorter ones in what is left, each left to right. Done in one scan that
// collects every candidate occurrence, then accepts them in that precedence order.
std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text, bool parse_special) const {
  struct Candidate {
    size_t rank;  // position in vocab_.special_ids: longest first
    size_t begin;
    size_t length;
    int32_t id;
  };
  std::vector<Candidate> candidates;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const auto first = static_cast<uint8_t>(text[pos]);
    const auto& lengths = special_lengths_by_byte_[first];
    if (lengths.empty()) continue;
    const bool second_ok =
        pos + 1 < text.size() && special_second_bytes_[first][static_cast<uint8_t>(text[pos + 1])];
    for (size_t len : lengths) {
      if (pos + len > text.size() || (len >= 2 && !second_ok)) continue;
      auto it = special_by_text_.find(text.substr(pos, len));
      if (it == special_by_text_.end()) continue;
      const auto rank = static_cast<size_t>(it->second);
      const int32_t id = vocab_.special_ids[rank];
      if (!parse_special && vocab_.type(id) != TokenType::user_defined) continue;
      candidates.push_back(Candidate{rank, pos, len, id});
    }
  }
  if (candidates.empty()) return {Fragment{-1, 0, text.size()}};

  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.begin < b.begin;
  });

  std::map<size_t, Candidate> accepted;  // by begin; never overlapping
  for (const Candidate& c : candidates) {
    auto next = accepted.lower_bound(c.begin);
    if (next != accepted.end() && next->first < c.begin + c.length) continue;
    if (next != accepted.begin()) {
      auto prev = std::prev(next);
      if (prev->second.begin + prev->second.length > c.begin) continue;
    }
    accepted.emplace(c.begin, c);
  }

  std::vector<Fragment> fragments;
  size_t pos = 0;
  for (const auto& [begin, c] : accepted) {
    if (begin > pos) fragments.push_back(Fragment{-1, pos, begin - pos});
    fragments.push_back(Fragment{c.id, begin, c.length});
    pos = begin + c.length;
  }
  if (pos < text.size()) fragments.push_back(Fragment{-1, pos, text.size() - pos});
  return fragments;
}

void Tokenizer::encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (vocab_.data.kind == VocabKind::spm) {
    std::string escaped = vocab_.data.add_space_prefix && after_special ? std::string(spm_space) : std::string();
    escaped += escape_spaces(text);
    tokenizer::spm_encode(vocab_, escaped, out);
  } else if (vocab_.data.kind == VocabKind::wpm) {
    tokenizer::wordpiece_encode(vocab_, text, out);
  } else if (vocab_.data.kind == VocabKind::ugm) {
    unigram_->encode(text, out);  // its normalizer adds the space prefix to every fragment
  } else {
    tokenizer::bpe_encode(vocab_, pre_, text, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.data.add_bos && vocab_.data.bos_id >= 0) out.push_back(vocab_.data.bos_id);
  if (!text.empty()) {
    // SentencePiece prefixes a space at the start and after every special token.
    bool after_special = true;
    for (const Fragment& fragment : split_special(text, parse_special)) {
      if (fragment.token_id >= 0) {
        out.push_back(fragment.token_id);
        after_special = true;
      } else {
        encode_text(text.substr(fragment.begin, fragment.length), after_special, out);
        after_special = false;
      }
    }
  }
  if (add_special && vocab_.data.add_eos && vocab_.data.eos_id >= 0) out.push_back(vocab_.data.eos_id);
  if (add_special && vocab_.data.add_sep && vocab_.data.sep_id >= 0) out.push_back(vocab_.data.sep_id);
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_.n_tokens()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(vocab_.n_tokens() - 1) + ")");
  }
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.data.tokens[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return vocab_.type(id);
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::find(vocab_.eog_ids.begin(), vocab_.eog_ids.end(), id) != vocab_.eog_ids.end();
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  const std::string& text = vocab_.data.tokens[id];
  switch (vocab_.type(id)) {
    case TokenType::control:
    case TokenType::unknown: return render_special ? text : std::string();
    case TokenType::user_defined: return text;
    case TokenType::normal:
      return vocab_.data.kind != VocabKind::bpe || !vocab_.data.byte_level ? unescape_spaces(text)
                                                                            : decode_byte_level(text);
    case TokenType::byte:
      // SentencePiece byte tokens are spelled <0xHH>.
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      return decode_byte_level(text);
    case TokenType::unused:
    case TokenType::undefined: break;
  }
  return {};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  // SentencePiece's added leading space, and WordPiece's word mark on the first word.
  bool strip_space = ((vocab_.data.kind == VocabKind::spm || vocab_.data.kind == VocabKind::ugm) && vocab_.data.add_space_prefix) ||
                     vocab_.data.kind == VocabKind::wpm;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (piece.empty()) continue;
    // Undo the space encode() put in front of the text.
    if (strip_space && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

}  // namespace loom
