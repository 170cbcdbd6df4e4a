// Counters and latency histograms the engine keeps for `loom bench` and the server's /metrics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/prefix_disk_tier.h"

namespace loom {

// A cumulative histogram with fixed upper bounds (Prometheus style).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // per bucket, not cumulative; last = +Inf
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct EngineStats {
  uint64_t requests_submitted = 0;
  uint64_t requests_rejected = 0;
  uint64_t requests_finished = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_failed = 0;
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  uint64_t cached_prompt_tokens = 0;
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t running = 0;
  uint64_t waiting = 0;
  uint32_t kv_blocks_total = 0;
  uint32_t kv_blocks_used = 0;
  uint32_t kv_blocks_free = 0;
  uint32_t kv_blocks_cached = 0;  // unreferenced blocks kept for prefix reuse (counted in kv_blocks_free)
  uint32_t kv_block_size = 0;
  uint64_t prefix_queries = 0;
  uint64_t prefix_hits = 0;
  // The prefix cache's disk tier ([kv] disk_cache_path): off when disk_tier is false.
  bool disk_tier = false;
  DiskTierStats disk;
  uint64_t disk_cached_tokens = 0;  // prompt tokens loaded from it instead of computed
  // Images ([model] mmproj): encoded, answered from the encoder's cache, and the time encoding took.
  uint64_t images_encoded = 0;
  uint64_t image_cache_hits = 0;
  double encoder_seconds = 0;
  uint64_t draft_tokens_proposed = 0;
  uint64_t draft_tokens_accepted = 0;
  uint64_t draft_verifications = 0;  // sequence-steps that verified at least one proposal
  // Structured output: time spent computing and applying grammar masks and advancing matchers, and
  // the steps that had any constrained sequence (what `loom bench` sets against the step time).
  double grammar_seconds = 0;
  uint64_t grammar_steps = 0;
  // Drafts kept per verification (0..k); the mean is the mean accepted length.
  Histogram draft_accepted{{0, 1, 2, 3, 4, 5, 6, 8, 12, 16}};
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram tpot{{0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6, 1.2}};
  Histogram queue_time{{0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30}};

  // Share of proposed draft tokens the target kept (0 when nothing was proposed).
  double draft_acceptance_rate() const {
    return draft_tokens_proposed ? double(draft_tokens_accepted) / double(draft_tokens_proposed) : 0.0;
  }
  // Tokens a speculative sequence-step emits on average: the accepted drafts plus the one token the
  // target always adds (correction or bonus). 1.0 means speculation bought nothing.
  double tokens_per_verification() const {
    return draft_verifications ? double(draft_tokens_accepted + draft_verifications) / double(draft_verifications) : 0.0;
  }
};

}  // namespace loom
