// Engine's speculative half-step: ask the drafter for proposals before the forward pass, then verify
// them against the target's distributions after it (see speculative.h for the acceptance rule).
//
// KV: the proposals get allocator slots before the forward (so their K/V is written like any other
// row); after verification the sequence is truncated back to the tokens whose K/V is right (the
// computed tokens plus the accepted drafts). The correction/bonus token is computed next step, as
// a sampled token always is.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/speculative.h"
#include "plugin/host_services.h"

namespace loom {

void Engine::propose_drafts(const SchedulerDecision& decision) {
  if (!drafter_ || draft_k_ == 0) return;
  const auto n_vocab = static_cast<uint32_t>(model_->info().n_vocab);
  int64_t budget = config_.scheduler.max_batched_tokens - static_cast<int64_t>(decision.n_tokens());
  std::vector<DraftJob> jobs;
  std::vector<Sequence*> owners;
  for (const auto& chunk : decision.chunks) {
    Sequence& seq = *chunk.seq;
    seq.draft.clear();
    seq.draft_probs.clear();
    if (!chunk.samples() || !seq.request.speculative) continue;
    // Never propose past what the request may still emit (the target adds one token of its own),
    // past the context, or past the step's token budget.
    const int64_t n_tokens = static_cast<int64_t>(seq.tokens.size());
    const int64_t room = std::min({int64_t(draft_k_), int64_t(seq.request.max_tokens) - seq.n_generated() - 1,
                                   info_.n_ctx - n_tokens - 1, budget});
    if (room <= 0) continue;
    DraftJob job;
    job.seq_id = seq.id;
    job.tokens = std::span<const int32_t>(seq.tokens);
    job.max_draft = static_cast<uint32_t>(room);
    jobs.push_back(std::move(job));
    owners.push_back(&seq);
    budget -= room;
  }
  if (jobs.empty()) return;
  try {
    drafter_->propose(jobs, n_vocab);
  } catch (const std::exception& e) {
    // A failing drafter costs speed, never output: decode without drafts.
    if (!drafter_failed_logged_) {
      drafter_failed_logged_ = true;
      const std::string message = std::string("speculation off for this step: ") + e.what();
      default_host_services()->log(nullptr, LOOM_LOG_WARN, "engine", message.c_str());
    }
    return;
  }
  uint64_t n_proposed = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    DraftJob& job = jobs[i];
    Sequence& seq = *owners[i];
    const auto n = static_cast<uint32_t>(std::min<size_t>(job.draft.size(), job.max_draft));
    if (n == 0) continue;
    // No preemption for drafts: without free blocks the sequence simply decodes one token.
    if (!kv_->append(seq.id, job.draft.data(), n)) continue;
    seq.n_kv_tokens += n;
    job.draft.resize(n);
    seq.draft = std::move(job.draft);
    if (job.has_probs) {
      job.probs.resize(size_t(n) * n_vocab);
      seq.draft_probs = std::move(job.probs);
    }
    n_proposed += n;
  }
  std::lock_guard lock(mutex_);
  stats_.draft_tokens_proposed += n_proposed;
}

void Engine::verify_drafts(Sequence& seq, size_t first_logit_row) {
  const auto n_vocab = static_cast<uint32_t>(model_->info().n_vocab);
  const size_t v = n_vocab;
  const auto n_draft = static_cast<uint32_t>(seq.draft.size());
  const uint32_t n_rows = n_draft + 1;
  const uint32_t n_top = seq.request.n_logprobs;

  // The target's final distribution at every row, each seeing the history that row continues
  // (penalties depend on it). DISTRIBUTION_ONLY leaves the sampler's random stream untouched.
  const std::span<const int32_t> history = seq.penalty_history();
  spec_history_.assign(history.begin(), history.end());
  spec_history_.insert(spec_history_.end(), seq.draft.begin(), seq.draft.end());
  spec_probs_.resize(n_rows * v);
  // Structured output: row j continues the drafts before it, so it is masked by the grammar after
  // them. The matcher walks the drafts to mask each row, then steps back; the tokens the verification
  // keeps advance it again in accept_token. A draft the grammar refuses gets probability 0 in the row
  // before it, so the verification rejects it there and the rows after it are never used.
  seq.request.sampling.params.allowed_tokens = nullptr;  // the rows carry their masks as -inf logits
  if (seq.constraint) {
    int advanced = 0;
    for (uint32_t j = 0; j < n_rows; ++j) {
      float* logits = logits_.data() + (first_logit_row + j) * v;
      if (!seq.constraint->mask_logits(logits, static_cast<int32_t>(n_vocab))) {
        if (j == 0) {  // nothing may follow the accepted output itself: a dead end, as in a plain step
          seq.draft.clear();
          seq.draft_probs.clear();
          kv_->truncate(seq.id, seq.n_computed);  // the drafts' slots were never part of the output
          seq.n_kv_tokens = seq.n_computed;
          finish(seq, FinishReason::grammar_dead_end);
          return;
        }
        // Nothing allowed: a draft before this row ended the output (a stop token), so the row is
        // never used; flat logits keep the sampler's distribution defined.
        std::fill(logits, logits + v, 0.0f);
        break;
      }
      if (j == n_draft || !seq.constraint->accept(seq.draft[j])) break;
      ++advanced;
    }
    seq.constraint->rollback(advanced);
  }
  std::vector<int32_t> top_tokens(size_t(n_rows) * n_top);
  std::vector<float> top_logprobs(size_t(n_rows) * n_top);
  seq.request.sampling.params.n_top_logprobs = n_top;
  std::vector<loom_sample_row> rows(n_rows);
  for (uint32_t j = 0; j < n_rows; ++j) {
    loom_sample_row& row = rows[j];
    row.struct_size = sizeof(row);
    row.flags = LOOM_SAMPLE_DISTRIBUTION_ONLY;
    row.params = &seq.request.sampling.params;
    row.state = seq.sampler_state;
    row.history = spec_history_.data();
    row.n_history = static_cast<uint32_t>(history.size()) + j;
    row.logits = logits_.data() + (first_logit_row + j) * v;
    row.out_probs = spec_probs_.data() + j * v;
    if (n_top > 0) {
      row.top_tokens = top_tokens.data() + size_t(j) * n_top;
      row.top_logprobs = top_logprobs.data() + size_t(j) * n_top;
    }
  }
  sampler_->sample(rows, n_vocab);

  const VerifyOutcome outcome = verify_draft(spec_probs_, seq.draft, seq.draft_probs, n_vocab, seq.spec_rng);
  seq.draft.clear();
  seq.draft_probs.clear();

  // Keep the K/V of the computed tokens and the accepted drafts; the rejected rows' slots go back.
  const uint32_t n_keep = seq.n_computed + outcome.n_accepted;
  kv_->truncate(seq.id, n_keep);
  seq.n_computed = n_keep;
  seq.n_kv_tokens = n_keep;
  {
    std::lock_guard lock(mutex_);
    stats_.draft_tokens_accepted += outcome.n_accepted;
    ++stats_.draft_verifications;
    stats_.draft_accepted.observe(outcome.n_accepted);
  }

  // Stop conditions apply to each token in order; whatever follows a stop is dropped.
  for (size_t i = 0; i < outcome.tokens.size(); ++i) {
    const int32_t token = outcome.tokens[i];
    TokenLogprob lp;
    lp.token = token;
    const float p = spec_probs_[i * v + static_cast<size_t>(token)];
    lp.logprob = p > 0.0f ? std::log(p) : -INFINITY;
    for (uint32_t k = 0; k < n_top; ++k) lp.top.emplace_back(top_tokens[i * n_top + k], top_logprobs[i * n_top + k]);
    accept_token(seq, token, std::move(lp));
    if (seq.status == SequenceStatus::finished) return;
  }
  try {
    drafter_->accepted(seq.id, static_cast<uint32_t>(seq.tokens.size()));
  } catch (const std::exception& e) {
    default_host_services()->log(nullptr, LOOM_LOG_WARN, "engine", e.what());
  }
}

}  // namespace loom
