// The working set a chain of stages narrows down: (logit, token) pairs in a reusable buffer.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/abi.h"

namespace loom::samplers {

struct Candidate {
  float logit;
  int32_t id;
};

// Higher logit first; equal logits go to the lower token id, so every cut is deterministic.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// ranks_before as a function object, so templates inline it instead of calling through a pointer.
struct RanksBefore {
  bool operator()(const Candidate& a, const Candidate& b) const { return ranks_before(a, b); }
};

struct CandidateSet {
  Candidate* data = nullptr;  // [n], points into Scratch::candidates
  uint32_t n = 0;
  bool is_sorted = false;    // data is in ranks_before order
  bool is_identity = false;  // data[i].id == i for every token of the vocabulary

  float max_logit() const {
    if (is_sorted) return data[0].logit;
    float best = -INFINITY;
    for (uint32_t i = 0; i < n; ++i) best = data[i].logit > best ? data[i].logit : best;
    return best;
  }
  // Sum of exp(logit - max) in double: the softmax denominator relative to the maximum.
  double sum_exp(float max) const {
    double sum = 0.0;
    for (uint32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(data[i].logit - max));
    return sum;
  }
  // Drops candidates whose logit became -inf (banned by a bias or a penalty), keeping the order.
  void drop_masked() {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; ++i)
      if (data[i].logit != -INFINITY) data[kept++] = data[i];
    if (kept != n) is_identity = false;
    n = kept;
  }
};

// Reusable per-call buffers. An instance keeps a pool of these so concurrent sample() calls on
// disjoint rows never share one, and steady-state sampling allocates nothing.
struct Scratch {
  std::vector<Candidate> candidates;  // [n_vocab]
  std::vector<int32_t> token_counts;  // [n_vocab], all zero between uses
  std::vector<float> token_bias;      // [n_vocab], all zero between uses
  std::vector<int32_t> touched;       // tokens whose count/bias is non-zero, to clear them in O(touched)
  std::vector<Candidate> top;         // [n_top_logprobs] selection heap
  std::vector<Candidate> heap;        // [top_k] selection heap
  std::vector<float> masked_logits;   // [n_vocab] the row's logits with disallowed tokens at -inf
  std::vector<double> probs;          // Mirostat: the sorted set's probabilities
  std::vector<uint8_t> breaker_mask;  // [n_vocab] DRY's breaker tokens, all zero between uses

  void reserve_vocab(uint32_t n_vocab) {
    if (candidates.size() < n_vocab) candidates.resize(n_vocab);
    if (token_counts.size() < n_vocab) token_counts.resize(n_vocab, 0);
    if (token_bias.size() < n_vocab) token_bias.resize(n_vocab, 0.0f);
  }
};

// The one exception type inside the plugin; the ABI edge turns it into status + message.
struct SamplerError : std::runtime_error {
  SamplerError(loom_status status_, const std::string& message) : std::runtime_error(message), status(status_) {}
  loom_status status;
};

[[noreturn]] inline void fail_invalid(const std::string& message) {
  throw SamplerError(LOOM_STATUS_INVALID_ARGUMENT, message);
}

}  // namespace loom::samplers
