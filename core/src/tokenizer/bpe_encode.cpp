#include <queue>
#include <string>

#include "tokenizer/merge_algorithms.h"
#include "tokenizer/unicode.h"

namespace loom::tokenizer {
namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  const char* text;
  size_t n;
};

struct Bigram {
  int32_t left;
  int32_t right;
  int32_t rank;
  size_t size;
};

// Lowest rank first; ties go to the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeWord {
 public:
  BpeWord(const Vocab& vocab, std::string_view word) : vocab_(vocab) {
    size_t offset = 0;
    int32_t index = 0;
    while (offset < word.size()) {
      const size_t len = std::min(utf8_sequence_length(static_cast<uint8_t>(word[offset])), word.size() - offset);
      symbols_.push_back(Symbol{index - 1, offset + len == word.size() ? -1 : index + 1, word.data() + offset, len});
      offset += len;
      ++index;
    }
  }

  void merge() {
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add_bigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      // Symbols only ever grow to the right, so a matching total size means the pair is unchanged.
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }
  }

  void emit(std::vector<int32_t>& out) const {
    for (const Symbol& sym : symbols_) {
      if (sym.n == 0) continue;
      const std::string_view text(sym.text, sym.n);
      const int32_t id = vocab_.find(text);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      // Byte-level: not reachable with a complete vocabulary; mirror llama.cpp and try single bytes.
      // Over UTF-8 pieces (Gemma 4): the <0xHH> byte tokens, as SentencePiece's byte fallback.
      for (char c : text) {
        int32_t byte_id = -1;
        if (vocab_.data.byte_level) {
          byte_id = vocab_.find(std::string_view(&c, 1));
        } else {
          static constexpr char kHex[] = "0123456789ABCDEF";
          const auto b = static_cast<uint8_t>(c);
          const char spelled[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
          byte_id = vocab_.find(std::string_view(spelled, 6));
        }
        if (byte_id >= 0) out.push_back(byte_id);
      }
    }
  }

 private:
  void try_add_bigram(int32_t left, int32_t right) {
    if (left == -1 || right == -1) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    const int32_t rank = vocab_.find_merge(std::string_view(l.text, l.n), std::string_view(r.text, r.n), key_);
    if (rank < 0) return;
    queue_.push(Bigram{left, right, rank, l.n + r.n});
  }

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  std::string key_;
};

}  // namespace

void bpe_encode(const Vocab& vocab, const PreTokenizer& pre, std::string_view text, std::vector<int32_t>& out) {
  std::string mapped;
  if (!vocab.data.byte_level) {
    // Pieces are raw UTF-8 with spaces spelled U+2581, as the vocabulary stores them.
    std::string escaped;
    for (char c : text) escaped += c == ' ' ? std::string_view("\xE2\x96\x81") : std::string_view(&c, 1);
    for (const std::string& word : pre.split(escaped)) {
      // A run of newlines is one token when the vocabulary has it (Gemma 4's tokenizer.json does not
      // merge newlines pairwise the way its ranks would).
      if (word.find_first_not_of('\n') == std::string::npos) {
        if (const int32_t id = vocab.find(word); id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      BpeWord bpe(vocab, word);
      bpe.merge();
      bpe.emit(out);
    }
    return;
  }
  for (const std::string& word : pre.split(text)) {
    mapped.clear();
    for (char c : word) mapped += byte_to_unicode(static_cast<uint8_t>(c));
    if (pre.ignore_merges()) {
      const int32_t id = vocab.find(mapped);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    BpeWord bpe(vocab, mapped);
    bpe.merge();
    bpe.emit(out);
  }
}

}  // namespace loom::tokenizer
