// Drafter — the engine's C++ face of a speculative-decoding drafter. The in-tree implementation
// wraps a drafter plugin (PluginDrafter); tests and benchmarks can inject their own (e.g. one that
// proposes garbage, which must never change what greedy decoding produces).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom {

struct DraftJob {
  uint64_t seq_id = 0;
  std::span<const int32_t> tokens;  // the whole sequence so far (prompt + output)
  uint32_t max_draft = 0;
  // outputs
  std::vector<int32_t> draft;  // at most max_draft token ids, each in [0, n_vocab)
  std::vector<float> probs;    // [draft.size(), n_vocab] q of each proposal when has_probs
  bool has_probs = false;      // false: the proposals are deterministic (q is one-hot)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Propose for every job. loom::Error when the drafter fails; the engine then decodes without drafts.
  virtual void propose(std::vector<DraftJob>& jobs, uint32_t n_vocab) = 0;
  // The sequence now holds exactly n_tokens tokens (some drafts may have been rejected).
  virtual void accepted(uint64_t seq_id, uint32_t n_tokens) = 0;
  // The sequence is finished; forget it.
  virtual void release(uint64_t seq_id) = 0;
};

}  // namespace loom
