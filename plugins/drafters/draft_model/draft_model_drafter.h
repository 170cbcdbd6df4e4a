// DraftModelDrafter — proposes k tokens by running a small model through the host's model_*
// services. Per sequence it remembers which tokens the host model holds, so each proposal only
// appends what changed since the last one (after rolling back rejected drafts).
//
// temperature 0 (default): greedy proposals, reported as deterministic (has_probs = 0).
// temperature > 0: proposals sampled from q = softmax(logits / temperature) with a per-sequence RNG
// seeded from (seed, seq_id); q is reported (has_probs = 1) so the host can verify exactly.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/drafter.h"

namespace loom::drafters {

struct DraftModelOptions {
  std::string model_path;
  uint32_t k = 4;
  float temperature = 0.0f;
  uint64_t seed = 0;
};

class DraftModelDrafter {
 public:
  // DrafterError (UNSUPPORTED) when the host has no model services; the host's message otherwise.
  DraftModelDrafter(const loom_host_services* host, DraftModelOptions options);
  ~DraftModelDrafter();
  DraftModelDrafter(const DraftModelDrafter&) = delete;
  DraftModelDrafter& operator=(const DraftModelDrafter&) = delete;

  void propose(loom_draft_request& request);
  void accepted(uint64_t seq_id, uint32_t n_tokens);
  void release(uint64_t seq_id);

 private:
  struct SeqState {
    std::vector<int32_t> held;  // tokens whose K/V the host model holds for this sequence
    std::mt19937_64 rng;
  };
  [[noreturn]] void host_failed(loom_status status, const std::string& what) const;
  SeqState& state_of(uint64_t seq_id);
  // Bring the host sequence to `tokens` and return the logits after its last token.
  bool sync(uint64_t seq_id, SeqState& state, const int32_t* tokens, uint32_t n_tokens);
  int32_t choose(SeqState& state, float* out_probs);

  const loom_host_services* host_;
  DraftModelOptions options_;
  loom_host_model_t* model_ = nullptr;
  loom_host_model_info info_{};
  std::unordered_map<uint64_t, SeqState> seqs_;
  std::vector<float> logits_;  // [n_vocab] after the last appended token
};

}  // namespace loom::drafters
