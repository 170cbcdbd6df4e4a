// Scheduler — policy only (nano-vllm's split): every step it decides which sequences run and how many
// of their tokens are computed, within max_num_seqs and max_batched_tokens. Decode tokens of running
// sequences go first, then the rest of chunked prefills, then waiting ones join while budget and KV
// blocks last; while any sequence decodes, prompt chunks take at most prefill_tokens_while_decoding
// tokens of a step, so a long prompt arriving does not stall the streams already running. When blocks run out it preempts by recompute: the youngest running sequence gives its
// blocks back and returns to the front of the queue; its full blocks stay in the prefix cache, so
// recomputing is often cheap. It never touches KV memory or the model.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "config/config.h"
#include "engine/kv_manager.h"
#include "engine/sequence.h"

namespace loom {

struct ScheduledChunk {
  Sequence* seq = nullptr;
  uint32_t n_tokens = 0;  // compute tokens [seq->n_computed, seq->n_computed + n_tokens)
  bool samples() const { return seq->n_computed + n_tokens == seq->tokens.size(); }
};

struct SchedulerDecision {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;  // moved back to waiting this step
  uint32_t n_tokens() const;
};

class Scheduler {
 public:
  Scheduler(const SchedulerSettings& settings, KvManager& kv);
  // Prompt chunks of one sequence stay within `rows` per step (window rings; 0 = no limit).
  void limit_rows_per_sequence(uint32_t rows) { max_rows_per_sequence_ = rows; }
  // Called as a sequence is admitted, once the memory prefix cache has given what it holds: returns
  // how many leading tokens have K/V now, at least seq.n_computed (the disk tier loads more).
  using PrefixExtender = std::function<uint32_t(Sequence&)>;
  void set_prefix_extender(PrefixExtender extender) { extend_prefix_ = std::move(extender); }

  void add(Sequence* seq);
  SchedulerDecision schedule();
  // Drop a sequence from the queues and give its blocks back (finished or cancelled).
  void remove(Sequence* seq);

  size_t n_waiting() const { return waiting_.size(); }
  size_t n_running() const { return running_.size(); }
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  uint64_t n_preemptions() const { return n_preemptions_; }

 private:
  bool ensure_kv(Sequence* seq, SchedulerDecision& decision);
  void preempt(Sequence* victim, SchedulerDecision& decision);
  bool admit(Sequence* seq);
  uint32_t computed_prefix(Sequence* seq, uint32_t n_cached);

  SchedulerSettings settings_;
  uint32_t max_rows_per_sequence_ = 0;
  PrefixExtender extend_prefix_;
  KvManager& kv_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order: the back is the youngest
  uint64_t n_preemptions_ = 0;
};

}  // namespace loom
