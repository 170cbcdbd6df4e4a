#include "engine/scheduler.h"

#include <algorithm>

#include "common/error.h"

namespace loom {

uint32_t SchedulerDecision::n_tokens() const {
  uint32_t n = 0;
  for (const auto& c : chunks) n += c.n_tokens;
  return n;
}

Scheduler::Scheduler(const SchedulerSettings& settings, KvManager& kv) : settings_(settings), kv_(kv) {}

void Scheduler::add(Sequence* seq) {
  seq->status = SequenceStatus::waiting;
  if (settings_.policy == "priority") {
    // Stable: among equal priorities, first come first served.
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [&](const Sequence* s) { return s->request.priority < seq->request.priority; });
    waiting_.insert(it, seq);
  } else {
    waiting_.push_back(seq);
  }
}

void Scheduler::remove(Sequence* seq) {
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  if (seq->has_kv) {
    kv_.free(seq->id);
    seq->has_kv = false;
  }
}

void Scheduler::preempt(Sequence* victim, SchedulerDecision& decision) {
  running_.erase(std::remove(running_.begin(), running_.end(), victim), running_.end());
  if (victim->has_kv) kv_.free(victim->id);
  victim->has_kv = false;
  victim->n_computed = 0;
  victim->status = SequenceStatus::waiting;
  ++victim->n_preemptions;
  ++n_preemptions_;
  waiting_.push_front(victim);  // it was admitted before everything still waiting
  decision.preempted.push_back(victim);
}

// The allocator holds every known token of a running sequence except, at most, the one sampled last
// step; give it that one now, preempting younger sequences until it fits.
bool Scheduler::ensure_kv(Sequence* seq, SchedulerDecision& decision) {
  uint32_t held = seq->n_kv_tokens;
  uint32_t missing = static_cast<uint32_t>(seq->tokens.size()) - held;
  if (missing == 0) return true;
  while (!kv_.append(seq->id, seq->tokens.data() + held, missing)) {
    Sequence* youngest = running_.back();
    preempt(youngest, decision);
    if (youngest == seq) return false;
  }
  seq->n_kv_tokens = static_cast<uint32_t>(seq->tokens.size());
  return true;
}

// The allocator registers a prompt's blocks for reuse when the sequence is created, before their K/V
// is computed. A block shared from a sequence whose prefill is still under way (chunked) holds
// nothing yet: recompute from the first such block. The values written are the same, so writing
// them into the shared block again is harmless.
uint32_t Scheduler::computed_prefix(Sequence* seq, uint32_t n_cached) {
  if (n_cached == 0) return 0;
  const uint32_t block_size = kv_.block_size();
  std::vector<int32_t> pending;
  for (Sequence* other : running_) {
    if (other->n_computed >= other->n_kv_tokens) continue;
    auto table = kv_.block_table(other->id);
    for (size_t b = other->n_computed / block_size; b < table.size(); ++b) pending.push_back(table[b]);
  }
  if (pending.empty()) return n_cached;
  auto table = kv_.block_table(seq->id);
  for (uint32_t b = 0; b < n_cached / block_size && b < table.size(); ++b) {
    if (std::find(pending.begin(), pending.end(), table[b]) != pending.end()) return b * block_size;
  }
  return n_cached;
}

bool Scheduler::admit(Sequence* seq) {
  auto n_cached = kv_.create(seq->id, seq->tokens, seq->lora_cache_key);
  if (!n_cached) return false;
  seq->has_kv = true;
  seq->n_kv_tokens = static_cast<uint32_t>(seq->tokens.size());
  seq->n_computed = std::min(*n_cached, computed_prefix(seq, *n_cached));
  // A recurrent state resumes exactly where its checkpoint was taken (the allocator queued the copy),
  // or from nothing.
  if (kv_.n_state_slots() > 0 && seq->n_computed != *n_cached) seq->n_computed = 0;
  if (extend_prefix_) seq->n_computed = extend_prefix_(*seq);
  if (seq->n_preemptions == 0) seq->n_cached = seq->n_computed;
  seq->state_checkpoint_at = 0;
  if (kv_.n_state_checkpoints() > 0 && seq->n_prompt > 0) {
    // The deepest block a later prompt repeating this one can reuse (a prompt's last token is
    // always computed).
    uint32_t boundary = (seq->n_prompt - 1) / kv_.block_size() * kv_.block_size();
    // No chunk ends inside an image: a boundary there moves to the last one before the image.
    for (const PromptImage& image : seq->request.images)
      if (boundary > image.first && boundary < image.first + image.n_rows) boundary = image.first / kv_.block_size() * kv_.block_size();
    if (boundary > seq->n_computed) seq->state_checkpoint_at = boundary;
  }
  seq->status = SequenceStatus::running;
  running_.push_back(seq);
  return true;
}

SchedulerDecision Scheduler::schedule() {
  SchedulerDecision decision;
  int64_t budget = settings_.max_batched_tokens;

  // 1. Running sequences, oldest first, get the KV slot of the token they sampled last (preempting
  // the youngest when blocks run out). Those decoding take one token each, before any prompt chunk:
  // a long prompt never delays a running stream's next token.
  std::vector<Sequence*> prompts;  // running sequences with prompt tokens still to compute
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* seq = running_[i];
    if (!ensure_kv(seq, decision)) break;  // it preempted itself: everything after it is younger
    const uint32_t n = seq->n_uncomputed();
    if (n == 0) continue;
    if (n > 1) {
      prompts.push_back(seq);
    } else if (budget > 0) {
      decision.chunks.push_back({seq, 1});
      budget -= 1;
    }
  }

  // 2. Prompt chunks share what is left; while streams decode in this step, at most
  // prefill_tokens_while_decoding of it, so the step stays short (mixed prefill/decode steps).
  const bool decoding = !decision.chunks.empty();
  int64_t prompt_budget = budget;
  if (decoding && settings_.chunked_prefill && settings_.prefill_tokens_while_decoding > 0)
    prompt_budget = std::min(prompt_budget, settings_.prefill_tokens_while_decoding);
  // Whether `seq` computes (part of) its prompt this step; false: without chunked prefill, a prompt
  // that does not fit runs whole in a later step.
  auto schedule_prompt = [&](Sequence* seq) {
    uint32_t n = seq->n_uncomputed();
    if (max_rows_per_sequence_ > 0) n = std::min(n, max_rows_per_sequence_);
    if (n > prompt_budget) {
      if (!settings_.chunked_prefill && !decision.chunks.empty()) return false;
      n = static_cast<uint32_t>(prompt_budget);
    }
    // A chunk ends where the recurrent state is to be checkpointed, so the state is there to copy.
    if (seq->state_checkpoint_at > seq->n_computed) n = std::min(n, seq->state_checkpoint_at - seq->n_computed);
    // An image's rows are computed in one chunk (they attend to each other): a chunk that would end
    // inside one ends before it, or, starting at or inside it, takes all of it (rows before the start
    // are in the cache already, from the step or the prefix hit that computed them with the rest).
    const uint32_t start = seq->n_computed;
    for (const PromptImage& image : seq->request.images) {
      const uint32_t end = start + n, image_end = image.first + image.n_rows;
      if (end <= image.first || end >= image_end) continue;
      if (image.first > start) {
        n = image.first - start;
      } else {
        // The whole image, within the step's token budget: the share prompts get beside decoding
        // streams (prefill_tokens_while_decoding, 128) is less than a Gemma 3 image (256 rows), and an
        // image held to it would wait until nothing else generates.
        n = image_end - start;
        if (n > budget && !decision.chunks.empty()) return false;  // the whole image next step
      }
      break;
    }
    decision.chunks.push_back({seq, n});
    prompt_budget -= n;
    budget -= n;
    return true;
  };
  for (Sequence* seq : prompts) {
    if (prompt_budget <= 0) break;
    schedule_prompt(seq);
  }

  // 3. Waiting sequences join while there is room; not in a step that had to preempt (that would
  // take back the blocks just freed and thrash).
  while (decision.preempted.empty() && !waiting_.empty() && prompt_budget > 0 &&
         running_.size() < static_cast<size_t>(settings_.max_num_seqs)) {
    Sequence* seq = waiting_.front();
    if (!admit(seq)) break;  // not enough free blocks: wait for running sequences to finish
    waiting_.pop_front();
    if (!schedule_prompt(seq)) break;  // runs alone next step
  }
  return decision;
}

}  // namespace loom
