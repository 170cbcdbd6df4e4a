#include <algorithm>
#include <string>

#include "stages.h"

namespace loom::samplers {

namespace {

float penalised(float logit, int32_t count, const loom_sampling_params& p) {
  // CTRL's rule as llama.cpp applies it: dividing a negative logit would *raise* it, so negative
  // logits are multiplied instead; applied once per distinct token, not once per occurrence.
  float value = logit > 0.0f ? logit / p.repetition_penalty : logit * p.repetition_penalty;
  value -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  return value;
}

}  // namespace

void apply_penalties(CandidateSet& set, const loom_sampling_params& p, const int32_t* history, uint32_t n_history,
                     uint32_t n_vocab, Scratch& scratch) {
  if (p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return;
  const uint32_t window =
      p.penalty_last_n < 0 ? n_history : std::min<uint32_t>(n_history, static_cast<uint32_t>(p.penalty_last_n));
  if (window == 0) return;
  if (history == nullptr) fail_invalid("history is NULL but n_history = " + std::to_string(n_history));

  std::vector<int32_t>& counts = scratch.token_counts;
  std::vector<int32_t>& touched = scratch.touched;
  touched.clear();
  const int32_t* begin = history + (n_history - window);
  for (uint32_t i = 0; i < window; ++i) {
    const int32_t token = begin[i];
    if (token < 0 || static_cast<uint32_t>(token) >= n_vocab) {
      for (int32_t t : touched) counts[t] = 0;
      fail_invalid("history[" + std::to_string(n_history - window + i) + "] = " + std::to_string(token) +
                   " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
    if (counts[token]++ == 0) touched.push_back(token);
  }

  bool is_masking = false;
  if (set.is_identity) {
    // The full vocabulary in token order: touch only the penalised tokens, O(window).
    for (int32_t token : touched) {
      set.data[token].logit = penalised(set.data[token].logit, counts[token], p);
      is_masking |= set.data[token].logit == -INFINITY;
    }
  } else {
    for (uint32_t i = 0; i < set.n; ++i) {
      const int32_t count = counts[set.data[i].id];
      if (count > 0) set.data[i].logit = penalised(set.data[i].logit, count, p);
      is_masking |= set.data[i].logit == -INFINITY;
    }
  }
  for (int32_t token : touched) counts[token] = 0;
  set.is_sorted = false;
  // Only a -inf bias or an overflowing penalty masks a token; skip the O(n) compaction otherwise.
  if (is_masking) set.drop_masked();
}

}  // namespace loom::samplers
