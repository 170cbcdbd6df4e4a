// Engine::step — one scheduler decision, one forward pass over the mixed batch, one sampling pass.
#include <algorithm>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace loom {

bool Engine::step() {
  std::lock_guard step_lock(step_mutex_);
  drain_inbox();
  if (!scheduler_->has_work()) {
    update_stats(false);  // cancellations may have freed blocks
    return false;
  }

  SchedulerDecision decision = scheduler_->schedule();
  if (decision.chunks.empty()) {
    // Nothing could run: only possible when the head of the queue cannot get blocks even with
    // nothing else running. Admission keeps every request within n_ctx, which the pool holds, so this
    // is a last line of defence: a sequence that has generated keeps its text and ends as if it had
    // reached its length; one that never ran is refused rather than left waiting forever.
    if (scheduler_->n_running() == 0) {
      for (auto& [id, seq] : sequences_) {
        if (seq->status != SequenceStatus::waiting) continue;
        if (seq->n_generated() > 0) {
          finish(*seq, FinishReason::length);
        } else {
          finish(*seq, FinishReason::error, "not enough free KV blocks for this request even with nothing else running");
        }
        break;
      }
    }
  } else {
    const auto now = Clock::now();
    for (const auto& chunk : decision.chunks) {
      if (chunk.seq->first_scheduled == Clock::time_point{}) {
        chunk.seq->first_scheduled = now;
        std::lock_guard lock(mutex_);
        stats_.queue_time.observe(std::chrono::duration<double>(now - chunk.seq->arrival).count());
      }
    }
    propose_drafts(decision);
    build_batch(decision);
    run_pending_copies();
    model_->forward(batch_, kv_cache_, logits_);
    save_blocks_to_disk(decision);
    sample_and_advance(decision);
    checkpoint_states(decision);
  }

  update_stats(true);
  return true;
}

void Engine::update_stats(bool stepped) {
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    it = it->second->status == SequenceStatus::finished ? sequences_.erase(it) : std::next(it);
  }
  const loom_kv_stats kv = kv_->stats();
  std::lock_guard lock(mutex_);
  if (stepped) ++stats_.steps;
  stats_.preemptions = scheduler_->n_preemptions();
  stats_.running = scheduler_->n_running();
  stats_.waiting = scheduler_->n_waiting() + inbox_.size();
  stats_.kv_blocks_used = kv.n_used;
  stats_.kv_blocks_free = kv.n_free;
  stats_.kv_blocks_cached = kv.n_cached;
  stats_.prefix_queries = kv.prefix_queries;
  stats_.prefix_hits = kv.prefix_hits;
}

namespace {

// A row's M-RoPE position (time, height, width, extra) from its index in the sequence: an image's
// rows by their place in its grid, every later row shifted back by what the images saved (each
// advances the positions by max(columns, rows), not by its row count), as mtmd places them.
std::array<int32_t, 4> mrope_position(const std::vector<PromptImage>& images, uint32_t index) {
  int64_t shift = 0;
  for (const PromptImage& image : images) {
    if (image.grid_columns == 0) continue;
    if (index < image.first) break;
    const uint32_t r = index - image.first;
    if (r < image.n_rows) {
      const auto p = static_cast<int32_t>(image.first + shift);
      return {p, p + static_cast<int32_t>(r / image.grid_columns), p + static_cast<int32_t>(r % image.grid_columns), 0};
    }
    shift += int64_t(std::max(image.grid_columns, image.grid_rows)) - int64_t(image.n_rows);
  }
  // Text rows turn by their position in three components and 0 in the fourth, as llama.cpp feeds
  // token batches (only an interleaved model's last pairs read it: Qwen3-VL's 61 and 62).
  const auto p = static_cast<int32_t>(index + shift);
  return {p, p, p, 0};
}

}  // namespace

void Engine::build_batch(const SchedulerDecision& decision) {
  batch_.clear();
  const int32_t block_size = static_cast<int32_t>(info_.kv_block_size);
  const bool mrope = model_->info().mrope;
  mrope_rows_.clear();
  for (const auto& chunk : decision.chunks) {
    Sequence& seq = *chunk.seq;
    // Draft tokens ride along as extra query rows after the chunk; each row's logits verify the
    // next proposal, and the last one gives the bonus token.
    const auto n_draft = static_cast<uint32_t>(seq.draft.size());
    const uint32_t n_rows = chunk.n_tokens + n_draft;
    ForwardBatch::Seq entry;
    const auto chunk_row = static_cast<int32_t>(batch_.tokens.size());
    entry.first_row = chunk_row;
    entry.n_query = static_cast<int32_t>(n_rows);
    entry.context_len = static_cast<int32_t>(seq.n_computed + n_rows);
    entry.block_table = kv_->block_table(seq.id);
    if (kv_->n_state_slots() > 0) entry.state_slot = kv_->state_slot(seq.id);
    entry.lora_slot = seq.lora_slot;
    split_at_images(seq, entry);
    for (uint32_t i = 0; i < n_rows; ++i) {
      const int32_t position = static_cast<int32_t>(seq.n_computed + i);
      batch_.tokens.push_back(i < chunk.n_tokens ? seq.tokens[static_cast<size_t>(position)] : seq.draft[i - chunk.n_tokens]);
      batch_.positions.push_back(position);
      if (mrope) mrope_rows_.push_back(mrope_position(seq.request.images, static_cast<uint32_t>(position)));
      const int32_t block = entry.block_table.at(static_cast<size_t>(position / block_size));
      batch_.slot_mapping.push_back(block * block_size + position % block_size);
    }
    if (chunk.samples()) {
      for (uint32_t j = 0; j <= n_draft; ++j) {
        batch_.logit_rows.push_back(chunk_row + static_cast<int32_t>(chunk.n_tokens - 1 + j));
      }
    }
    if (entry.n_query > 0) batch_.seqs.push_back(std::move(entry));  // none left when an image ends the chunk
  }
  if (mrope) {  // component-major, as ForwardBatch::rope_positions
    const size_t n = mrope_rows_.size();
    batch_.rope_positions.resize(4 * n);
    for (size_t c = 0; c < 4; ++c)
      for (size_t i = 0; i < n; ++i) batch_.rope_positions[c * n + i] = mrope_rows_[i][c];
  }
}

// A chunk holding an image's rows (or some of them) gives the model their values, and, where the image
// is decoded non-causally, becomes several entries over the sequence's block table: text before,
// the image's rows, text after. Called before the chunk's rows are added: `entry` covers them all.
void Engine::split_at_images(const Sequence& seq, ForwardBatch::Seq& entry) {
  const uint32_t first = seq.n_computed, end = first + static_cast<uint32_t>(entry.n_query);
  ForwardBatch::Seq rest = entry;
  for (const PromptImage& image : seq.request.images) {
    const uint32_t lo = std::max(first, image.first), hi = std::min(end, image.first + image.n_rows);
    if (lo >= hi) continue;
    const int32_t row0 = entry.first_row + static_cast<int32_t>(lo - first);
    for (uint32_t p = lo; p < hi; ++p) batch_.embd_rows.push_back(entry.first_row + static_cast<int32_t>(p - first));
    const size_t width = static_cast<size_t>(model_->info().embd_row_width());
    batch_.embd.insert(batch_.embd.end(), image.rows->begin() + static_cast<ptrdiff_t>((lo - image.first) * width),
                       image.rows->begin() + static_cast<ptrdiff_t>((hi - image.first) * width));
    if (!image.non_causal) continue;
    if (row0 > rest.first_row) {  // the causal rows before the image
      ForwardBatch::Seq before = rest;
      before.n_query = row0 - rest.first_row;
      before.context_len = static_cast<int32_t>(lo);
      batch_.seqs.push_back(before);
    }
    ForwardBatch::Seq rows = rest;
    rows.first_row = row0;
    rows.n_query = static_cast<int32_t>(hi - lo);
    rows.context_len = static_cast<int32_t>(image.first + image.n_rows);  // a whole image is always in one chunk or cached
    rows.non_causal = true;
    batch_.seqs.push_back(rows);
    rest.first_row = row0 + rows.n_query;
    rest.n_query = entry.first_row + entry.n_query - rest.first_row;
  }
  entry.first_row = rest.first_row;
  entry.n_query = rest.n_query;
}

// Hybrid models: a sequence whose prefill just reached its checkpoint boundary has the recurrent state
// there in its slot; the allocator queues a copy, run before the next forward pass.
void Engine::checkpoint_states(const SchedulerDecision& decision) {
  for (const auto& chunk : decision.chunks) {
    Sequence& seq = *chunk.seq;
    if (seq.state_checkpoint_at == 0 || seq.n_computed != seq.state_checkpoint_at || !seq.has_kv) continue;
    kv_->checkpoint_state(seq.id, seq.state_checkpoint_at);
    save_state_to_disk(seq, seq.state_checkpoint_at);
    seq.state_checkpoint_at = 0;
  }
}

// Copy-on-write: blocks the allocator split off a shared block get its contents before anyone writes.
void Engine::run_pending_copies() {
  for (const auto& copy : kv_->take_pending_state_copies()) model_->copy_state_slot(kv_cache_, copy.src_slot, copy.dst_slot);
  const auto copies = kv_->take_pending_copies();
  if (copies.empty()) return;
  const auto& table = backend_->table();
  for (int32_t layer = 0; layer < model_->info().n_layers; ++layer) {
    if (!model_->info().owns_kv(layer)) continue;  // shared KV is copied with its owner; recurrent layers have none
    for (const loom_tensor* t : {&kv_cache_.k(layer), &kv_cache_.v(layer)}) {
      const uint64_t slot_bytes = t->nb[2];
      for (const auto& copy : copies) {
        const uint64_t src = t->offset + uint64_t(copy.src_block) * info_.kv_block_size * slot_bytes;
        const uint64_t dst = t->offset + uint64_t(copy.dst_block) * info_.kv_block_size * slot_bytes;
        loom_status status = table.copy_buffer(backend_->handle(), nullptr, t->buffer, dst, t->buffer, src,
                                               uint64_t(copy.n_tokens) * slot_bytes);
        if (status != LOOM_STATUS_OK) throw Error(std::string("KV copy-on-write failed: ") + table.last_error(backend_->handle()));
      }
    }
  }
}

void Engine::sample_and_advance(const SchedulerDecision& decision) {
  const auto n_vocab = static_cast<uint32_t>(model_->info().n_vocab);
  std::vector<Sequence*> sampled;
  rows_.clear();
  uint32_t max_top = 0;
  for (const auto& chunk : decision.chunks) {
    if (chunk.samples()) max_top = std::max(max_top, chunk.seq->request.n_logprobs);
  }
  top_tokens_.assign(size_t(max_top) * decision.chunks.size(), 0);
  top_logprobs_.assign(size_t(max_top) * decision.chunks.size(), 0.0f);

  size_t logit_row = 0;
  std::vector<std::pair<Sequence*, size_t>> speculative;  // sequence, its first logit row
  double grammar_seconds = 0;  // masks and matcher advances of this step
  bool any_constrained = false;
  for (const auto& chunk : decision.chunks) {
    Sequence& seq = *chunk.seq;
    const bool samples = chunk.samples();
    seq.n_computed += chunk.n_tokens;
    if (!samples) continue;
    if (!seq.draft.empty()) {
      speculative.emplace_back(&seq, logit_row);
      logit_row += seq.draft.size() + 1;
      continue;
    }
    float* logits = logits_.data() + logit_row * n_vocab;
    ++logit_row;
    // Structured output: the sampler draws only what the grammar allows. A plugin of ABI 1.3 or
    // later takes the bitmask; for older ones the engine writes -inf over the other logits.
    seq.request.sampling.params.allowed_tokens = nullptr;
    if (seq.constraint) {
      const auto mask_start = Clock::now();
      any_constrained = true;
      bool any = true;
      if (sampler_->takes_token_masks()) {
        seq.request.sampling.params.allowed_tokens = seq.constraint->allowed_tokens(static_cast<int32_t>(n_vocab), &any);
      } else {
        any = seq.constraint->mask_logits(logits, static_cast<int32_t>(n_vocab));
      }
      grammar_seconds += std::chrono::duration<double>(Clock::now() - mask_start).count();
      if (!any) {
        finish(seq, FinishReason::grammar_dead_end);
        continue;
      }
    }
    loom_sample_row row{};
    row.struct_size = sizeof(row);
    seq.request.sampling.params.n_top_logprobs = seq.request.n_logprobs;
    row.params = &seq.request.sampling.params;
    row.state = seq.sampler_state;
    const std::span<const int32_t> history = seq.penalty_history();
    row.history = history.data();
    row.n_history = static_cast<uint32_t>(history.size());
    row.logits = logits;
    if (seq.request.n_logprobs > 0) {
      row.top_tokens = top_tokens_.data() + rows_.size() * max_top;
      row.top_logprobs = top_logprobs_.data() + rows_.size() * max_top;
    }
    rows_.push_back(row);
    sampled.push_back(&seq);
  }
  sampler_->sample(rows_, n_vocab);
  for (size_t i = 0; i < sampled.size(); ++i) {
    TokenLogprob lp;
    lp.token = rows_[i].token;
    lp.logprob = rows_[i].logprob;
    for (uint32_t k = 0; k < sampled[i]->request.n_logprobs; ++k) {
      lp.top.emplace_back(rows_[i].top_tokens[k], rows_[i].top_logprobs[k]);
    }
    accept_token(*sampled[i], rows_[i].token, std::move(lp));
  }
  grammar_seconds += matcher_seconds_;
  matcher_seconds_ = 0;
  if (any_constrained) {
    std::lock_guard lock(mutex_);
    stats_.grammar_seconds += grammar_seconds;
    ++stats_.grammar_steps;
  }
  for (const auto& [seq, first_row] : speculative) verify_drafts(*seq, first_row);
}

void Engine::accept_token(Sequence& seq, int32_t token, TokenLogprob logprob) {
  const auto now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    ++stats_.generated_tokens;
    if (!seq.got_first_token) {
      stats_.ttft.observe(std::chrono::duration<double>(now - seq.arrival).count());
    } else {
      stats_.tpot.observe(std::chrono::duration<double>(now - seq.last_token).count());
    }
  }
  if (!seq.got_first_token) {
    seq.got_first_token = true;
    seq.first_token = now;
  }
  seq.last_token = now;
  seq.tokens.push_back(token);
  if (seq.constraint) {
    const auto start = Clock::now();
    const bool allowed = seq.constraint->accept(token);
    matcher_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    if (!allowed) {
      finish(seq, FinishReason::error, "sampled token " + std::to_string(token) + " is outside the output grammar");
      return;
    }
  }

  std::vector<TokenLogprob> logprobs;
  if (seq.request.want_logprobs) logprobs.push_back(std::move(logprob));
  if (!seq.request.ignore_eos && tokenizer_->is_end_of_generation(token)) {
    emit(seq, {token}, "", std::move(logprobs), FinishReason::none);
    finish(seq, FinishReason::stop);
    return;
  }
  std::string text = seq.stop->push(seq.decoder->push(token));
  const bool stopped = seq.stop->stopped();
  const bool at_limit = seq.n_generated() >= seq.request.max_tokens ||
                        static_cast<int64_t>(seq.tokens.size()) >= info_.n_ctx;
  emit(seq, {token}, std::move(text), std::move(logprobs), FinishReason::none);
  if (stopped) {
    finish(seq, FinishReason::stop);
  } else if (at_limit) {
    finish(seq, FinishReason::length);
  }
}

}  // namespace loom
