#include <string>

#include "stages.h"

namespace loom::samplers {

namespace {

void clear(Scratch& scratch) {
  for (int32_t token : scratch.touched) {
    scratch.token_bias[token] = 0.0f;
    scratch.token_counts[token] = 0;
  }
}

}  // namespace

void apply_logit_bias(CandidateSet& set, const loom_sampling_params& p, uint32_t n_vocab, Scratch& scratch) {
  if (p.n_logit_bias == 0) return;
  std::vector<float>& bias = scratch.token_bias;
  std::vector<int32_t>& touched = scratch.touched;
  touched.clear();
  for (uint32_t i = 0; i < p.n_logit_bias; ++i) {
    const int32_t token = p.logit_bias_tokens[i];
    if (token < 0 || static_cast<uint32_t>(token) >= n_vocab) {
      clear(scratch);
      fail_invalid("params: logit_bias_tokens[" + std::to_string(i) + "] = " + std::to_string(token) +
                   " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
    // token_counts doubles as a "seen" mark so a repeated token is applied once with its summed bias.
    if (scratch.token_counts[token]++ == 0) touched.push_back(token);
    bias[token] += p.logit_bias_values[i];
  }
  bool is_masking = false;
  if (set.is_identity) {
    for (int32_t token : touched) is_masking |= (set.data[token].logit += bias[token]) == -INFINITY;
  } else {
    for (uint32_t i = 0; i < set.n; ++i) is_masking |= (set.data[i].logit += bias[set.data[i].id]) == -INFINITY;
  }
  clear(scratch);
  set.is_sorted = false;
  // Only a -inf bias or an overflowing penalty masks a token; skip the O(n) compaction otherwise.
  if (is_masking) set.drop_masked();
}

}  // namespace loom::samplers
