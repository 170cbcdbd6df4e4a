#include <queue>

#include "tokenizer/merge_algorithms.h"
#include "tokenizer/unicode.h"

namespace loom::tokenizer {
namespace {

// A run of text in a doubly linked list; merged-away symbols keep n == 0.
struct Symbol {
  int32_t prev;
  int32_t next;
  const char* text;
  size_t n;
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  size_t size;
};

// Highest score first; ties go to the leftmost pair (as llama.cpp, so ids match).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  void encode(std::string_view text, std::vector<int32_t>& out) {
    symbols_.reserve(text.size());
    size_t offset = 0;
    int32_t index = 0;
    while (offset < text.size()) {
      const size_t len = std::min(utf8_sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
      Symbol sym{index - 1, offset + len == text.size() ? -1 : index + 1, text.data() + offset, len};
      offset += len;
      ++index;
      symbols_.push_back(sym);
    }
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram bigram = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[bigram.left];
      Symbol& right = symbols_[bigram.right];
      // Stale entry: one side was merged into something else since it was queued.
      if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }

    if (symbols_.empty()) return;
    for (int32_t i = 0; i != -1; i = symbols_[i].next) emit(symbols_[i], out);
  }

 private:
  void try_add_bigram(int32_t left, int32_t right) {
    if (left == -1 || right == -1) return;
    const std::string_view text(symbols_[left].text, symbols_[left].n + symbols_[right].n);
    const int32_t id = vocab_.find(text);
    if (id < 0) return;
    const float score = vocab_.data.scores.empty() ? 0.0f : vocab_.data.scores[id];
    queue_.push(Bigram{left, right, score, text.size()});
  }

  // Every merged symbol is a token by construction; only a single unknown character falls back to bytes.
  void emit(const Symbol& sym, std::vector<int32_t>& out) const {
    const std::string_view text(sym.text, sym.n);
    const int32_t id = vocab_.find(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    for (char c : text) {
      const int32_t byte_id = vocab_.byte_ids[static_cast<uint8_t>(c)];
      out.push_back(byte_id >= 0 ? byte_id : vocab_.data.unk_id >= 0 ? vocab_.data.unk_id : 0);
    }
  }

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  SpmSession(vocab).encode(text, out);
}

}  // namespace loom::tokenizer
