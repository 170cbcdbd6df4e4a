// Conformance cases for recurrent-state checkpoints (ABI 1.7): a hybrid model's cached prefix is
// reused only up to a block whose state was kept, and the new sequence's slot receives that state.
//
// The random run extends the state-slot simulation (kv_state_cases.cpp): each slot, sequences' and
// checkpoints' alike, holds a fold of the tokens its state has seen. Checkpoints are taken where a
// sequence's length sits on a block boundary; after every operation the pending copies are applied
// in order and every sequence must find the fold of exactly its own tokens, so a reuse that resumes
// from the wrong state, a copy lost or misdirected, or a checkpoint outliving its block all show up.
#include <map>
#include <random>
#include <set>

#include "conformance_case.h"
#include "kv_support.h"

namespace loom::conformance {

namespace {

std::string checkpoint_config(uint32_t n_blocks, uint32_t block_size, uint32_t n_slots, uint32_t n_checkpoints) {
  return "{\"n_blocks\": " + std::to_string(n_blocks) + ", \"block_size\": " + std::to_string(block_size) +
         ", \"prefix_caching\": true, \"n_state_slots\": " + std::to_string(n_slots) +
         ", \"n_state_checkpoints\": " + std::to_string(n_checkpoints) + "}";
}

// Skips plugins built against headers before 1.7 (their table ends before seq_checkpoint_state).
void require_checkpoints(const CaseContext& ctx) {
  const loom_kv_i* table = ctx.plugin->kv();
  require(table != nullptr, "plugin has no kv table");
  if (!LOOM_HAS_MEMBER(table, loom_kv_i, seq_checkpoint_state) || table->seq_checkpoint_state == nullptr ||
      table->seq_state_slot == nullptr || table->take_pending_state_copies == nullptr) {
    not_supported("the allocator keeps no state checkpoints (ABI 1.7)");
  }
}

uint32_t create(const KvInstance& kv, uint64_t id, const std::vector<int32_t>& tokens) {
  uint32_t n_cached = 0;
  kv.ok(kv->seq_create(kv.get(), id, tokens.data(), static_cast<uint32_t>(tokens.size()), &n_cached), "seq_create");
  return n_cached;
}

void case_checkpoint_basics(CaseContext& ctx) {
  require_checkpoints(ctx);
  constexpr uint32_t kSlots = 2;
  {
    KvInstance plain(ctx, "{\"n_blocks\": 8, \"block_size\": 4, \"n_state_slots\": 2}");
    create(plain, 1, iota_tokens(8, 1));
    require(plain->seq_checkpoint_state(plain.get(), 1, 4) == LOOM_STATUS_UNSUPPORTED,
            "seq_checkpoint_state without checkpoints configured must be UNSUPPORTED");
    require(plain.stats().n_state_checkpoints == 0, "n_state_checkpoints must be 0 when none are configured");
  }
  constexpr uint32_t kCheckpoints = 3;
  KvInstance kv(ctx, checkpoint_config(32, 4, kSlots, kCheckpoints));
  require(kv.stats().n_state_checkpoints == kCheckpoints && kv.stats().n_checkpoints_held == 0, "stats must report 3 checkpoints, none held");
  const std::vector<int32_t> prompt = iota_tokens(17, 1);
  create(kv, 1, prompt);
  const int32_t s1 = slot_of(kv, 1);
  for (uint32_t bad : {0u, 7u, 20u}) {
    require(kv->seq_checkpoint_state(kv.get(), 1, bad) == LOOM_STATUS_INVALID_ARGUMENT,
            "seq_checkpoint_state at " + std::to_string(bad) + " of 17 tokens (blocks of 4) must be INVALID_ARGUMENT");
  }
  require(kv->seq_checkpoint_state(kv.get(), 9, 4) == LOOM_STATUS_NOT_FOUND, "an unknown sequence must be NOT_FOUND");
  require(take_state_copies(kv).empty(), "a refused checkpoint queued a state copy");

  // Before any checkpoint nothing is reused, though the blocks are registered.
  create(kv, 2, prompt);
  uint32_t needed = 0;
  kv.ok(kv->blocks_needed(kv.get(), prompt.data(), 17, &needed), "blocks_needed");
  require(needed == 5, "without a checkpoint blocks_needed must count every block (5), got " + std::to_string(needed));
  kv.ok(kv->seq_free(kv.get(), 2), "seq_free");

  kv.ok(kv->seq_checkpoint_state(kv.get(), 1, 8), "seq_checkpoint_state");
  auto copies = take_state_copies(kv);
  require(copies.size() == 1 && copies[0].src_slot == s1 && copies[0].dst_slot >= int32_t(kSlots) && copies[0].dst_slot < int32_t(kSlots + kCheckpoints),
          "a checkpoint must queue one copy from the sequence's slot into a checkpoint slot (numbered after the sequences')");
  const int32_t checkpoint = copies[0].dst_slot;
  kv.ok(kv->seq_checkpoint_state(kv.get(), 1, 8), "seq_checkpoint_state (again)");
  require(take_state_copies(kv).empty() && kv.stats().n_checkpoints_held == 1, "checkpointing the same block twice must keep one copy");

  kv.ok(kv->blocks_needed(kv.get(), prompt.data(), 17, &needed), "blocks_needed");
  require(needed == 3, "with the state kept at 8 tokens blocks_needed must count 3 new blocks, got " + std::to_string(needed));
  const loom_kv_stats before = kv.stats();
  const uint32_t n_cached = create(kv, 3, prompt);
  require(n_cached == 8, "a prompt repeating a checkpointed prefix must reuse up to the checkpoint (8), got " + std::to_string(n_cached));
  require(before.n_free - kv.stats().n_free == needed, "blocks_needed disagrees with what seq_create took");
  copies = take_state_copies(kv);
  require(copies.size() == 1 && copies[0].src_slot == checkpoint && copies[0].dst_slot == slot_of(kv, 3),
          "a reuse must queue one copy from the checkpoint into the new sequence's slot");

  // Out of sequence slots: nothing is allocated and no copy is queued.
  const loom_kv_stats full = kv.stats();
  uint32_t ignored = 0;
  require(kv->seq_create(kv.get(), 4, prompt.data(), 17, &ignored) == LOOM_STATUS_OUT_OF_MEMORY,
          "seq_create with every state slot held must be OUT_OF_MEMORY");
  require(same_stats(full, kv.stats()) && take_state_copies(kv).empty(), "a failed seq_create changed the stats or queued a copy");

  // A checkpoint deeper in the chain wins; a prompt diverging before it reuses nothing.
  kv.ok(kv->seq_checkpoint_state(kv.get(), 1, 16), "seq_checkpoint_state");
  take_state_copies(kv);
  kv.ok(kv->seq_free(kv.get(), 3), "seq_free");
  require(create(kv, 5, prompt) == 16, "a prompt of 17 tokens must resume from the checkpoint at 16");
  kv.ok(kv->seq_free(kv.get(), 5), "seq_free");
  std::vector<int32_t> diverging = prompt;
  diverging[5] = 999;
  require(create(kv, 6, diverging) == 0, "a prompt diverging inside the first checkpointed block must reuse nothing");
  take_state_copies(kv);
  kv.ok(kv->seq_free(kv.get(), 6), "seq_free");

  // A sequence freed before the core copied its state out leaves no checkpoint behind.
  const std::vector<int32_t> other = iota_tokens(9, 500);
  create(kv, 7, other);
  kv.ok(kv->seq_checkpoint_state(kv.get(), 7, 8), "seq_checkpoint_state");
  require(kv.stats().n_checkpoints_held == 3, "the third checkpoint must be held");
  kv.ok(kv->seq_free(kv.get(), 7), "seq_free");
  require(take_state_copies(kv).empty() && kv.stats().n_checkpoints_held == 2,
          "freeing a sequence before its checkpoint's copy ran must drop the copy and the checkpoint");
  require(create(kv, 8, other) == 0, "a checkpoint whose state never arrived must not be reused");
  take_state_copies(kv);
  kv.ok(kv->seq_free(kv.get(), 8), "seq_free");
  kv.ok(kv->seq_free(kv.get(), 1), "seq_free");
  const loom_kv_stats end = kv.stats();
  require(end.n_state_free == kSlots && end.n_used == 0 && end.n_checkpoints_held == 2, "slots, blocks or checkpoints leaked");
}

void case_checkpoint_recycling(CaseContext& ctx) {
  require_checkpoints(ctx);
  // Three prompts, two checkpoint slots: the least recently used checkpoint is recycled. Then new
  // prompts fill the pool, evicting cached blocks, and a checkpoint goes with its block.
  KvInstance kv(ctx, checkpoint_config(12, 4, 2, 2));
  std::vector<std::vector<int32_t>> prompts = {iota_tokens(9, 100), iota_tokens(9, 200), iota_tokens(9, 300)};
  for (uint64_t i = 0; i < 3; ++i) {
    create(kv, 10 + i, prompts[i]);
    kv.ok(kv->seq_checkpoint_state(kv.get(), 10 + i, 8), "seq_checkpoint_state");
    take_state_copies(kv);  // the core copies the state before the sequence can go
    kv.ok(kv->seq_free(kv.get(), 10 + i), "seq_free");
    if (i == 1) {
      require(create(kv, 20, prompts[0]) == 8, "the first prompt's checkpoint must serve a repeat");
      kv.ok(kv->seq_free(kv.get(), 20), "seq_free");
    }
  }
  require(kv.stats().n_checkpoints_held == 2, "two checkpoint slots must hold two checkpoints");
  take_state_copies(kv);
  // prompts[0] was used after prompts[1] was checkpointed, so prompts[1]'s checkpoint was recycled.
  require(create(kv, 21, prompts[1]) == 0, "the least recently used checkpoint must be the one recycled");
  kv.ok(kv->seq_free(kv.get(), 21), "seq_free");
  require(create(kv, 22, prompts[0]) == 8 && create(kv, 23, prompts[2]) == 8, "the two recent checkpoints must still serve");
  kv.ok(kv->seq_free(kv.get(), 22), "seq_free");
  kv.ok(kv->seq_free(kv.get(), 23), "seq_free");
  take_state_copies(kv);
  // 12 blocks: a 48-token sequence needs all of them, so every cached block is evicted.
  create(kv, 30, iota_tokens(48, 1000));
  require(kv.stats().n_checkpoints_held == 0, "a checkpoint must be dropped with its evicted block");
  kv.ok(kv->seq_free(kv.get(), 30), "seq_free");
  require(create(kv, 31, prompts[0]) == 0, "an evicted block's checkpoint must not be reused");
}

void case_checkpoint_random_run(CaseContext& ctx) {
  require_checkpoints(ctx);
  constexpr uint32_t kSlots = 5, kCheckpoints = 4, kBlocks = 48, kBlockSize = 4;
  KvInstance kv(ctx, checkpoint_config(kBlocks, kBlockSize, kSlots, kCheckpoints));
  std::mt19937 rng(2027);
  auto uniform = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  std::vector<uint64_t> memory(kSlots + kCheckpoints, 0);  // simulated state per slot
  std::map<uint64_t, std::vector<int32_t>> seqs;            // each live sequence's tokens
  // Prompts start from a few shared stems, so prefixes repeat and checkpoints get hit.
  std::vector<std::vector<int32_t>> stems;
  for (int32_t s = 0; s < 3; ++s) stems.push_back(iota_tokens(24, 1000 * (s + 1)));
  auto fold_all = [](const std::vector<int32_t>& tokens, size_t n) {
    uint64_t state = 0;
    for (size_t i = 0; i < n; ++i) state = fold(state, tokens[i]);
    return state;
  };
  auto random_seq = [&] {
    auto it = seqs.begin();
    std::advance(it, uniform(0, static_cast<uint32_t>(seqs.size()) - 1));
    return it->first;
  };
  uint64_t next_id = 1;
  int32_t next_token = 1;
  int n_reuses = 0, n_checkpoints = 0, n_oom = 0;
  for (int op = 0; op < 3000; ++op) {
    const std::string where = " (op " + std::to_string(op) + ")";
    const uint32_t kind = seqs.empty() ? 0 : uniform(0, 99);
    if (kind < 30) {  // create from a stem's prefix plus a fresh tail
      const auto& stem = stems[uniform(0, 2)];
      std::vector<int32_t> tokens(stem.begin(), stem.begin() + uniform(1, 24));
      for (uint32_t i = uniform(0, 1) ? 0 : uniform(1, 3); i > 0; --i) tokens.push_back(next_token++);
      const uint64_t id = next_id++;
      uint32_t n_cached = 0;
      const loom_kv_stats before = kv.stats();
      const loom_status status = kv->seq_create(kv.get(), id, tokens.data(), static_cast<uint32_t>(tokens.size()), &n_cached);
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        require(same_stats(before, kv.stats()) && take_state_copies(kv).empty(), "a failed seq_create changed something" + where);
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_create");
      require(n_cached % kBlockSize == 0 && n_cached < tokens.size(), "n_cached off a block boundary or covering the prompt" + where);
      const int32_t slot = slot_of(kv, id);
      memory[static_cast<size_t>(slot)] = 0;  // the core starts a sequence that reuses nothing from zeros
      for (const loom_kv_state_copy& c : take_state_copies(kv)) memory[size_t(c.dst_slot)] = memory[size_t(c.src_slot)];
      require(memory[static_cast<size_t>(slot)] == fold_all(tokens, n_cached),
              "a new sequence reusing " + std::to_string(n_cached) + " tokens does not find their state in its slot" + where);
      if (n_cached > 0) ++n_reuses;
      uint64_t& state = memory[static_cast<size_t>(slot)];
      for (size_t i = n_cached; i < tokens.size(); ++i) state = fold(state, tokens[i]);
      seqs[id] = tokens;
      continue;
    }
    if (kind < 55) {  // append
      const uint64_t id = random_seq();
      std::vector<int32_t> tokens(uniform(1, 5));
      for (auto& t : tokens) t = next_token++;
      const loom_status status = kv->seq_append(kv.get(), id, tokens.data(), static_cast<uint32_t>(tokens.size()));
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_append");
      uint64_t& state = memory[static_cast<size_t>(slot_of(kv, id))];
      for (int32_t t : tokens) state = fold(state, t);
      seqs[id].insert(seqs[id].end(), tokens.begin(), tokens.end());
    } else if (kind < 75) {  // checkpoint a sequence whose state sits on a block boundary
      std::vector<uint64_t> aligned;
      for (const auto& [id, tokens] : seqs) {
        if (tokens.size() % kBlockSize == 0) aligned.push_back(id);
      }
      if (aligned.empty()) continue;
      const uint64_t id = aligned[uniform(0, static_cast<uint32_t>(aligned.size()) - 1)];
      kv.ok(kv->seq_checkpoint_state(kv.get(), id, static_cast<uint32_t>(seqs[id].size())), "seq_checkpoint_state");
      ++n_checkpoints;
    } else if (kind < 82) {  // fork
      const uint64_t src = random_seq(), dst = next_id++;
      const loom_status status = kv->seq_fork(kv.get(), src, dst);
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_fork");
      seqs[dst] = seqs[src];
    } else {  // free
      const uint64_t id = random_seq();
      kv.ok(kv->seq_free(kv.get(), id), "seq_free");
      seqs.erase(id);
    }
    for (const loom_kv_state_copy& c : take_state_copies(kv)) {
      require(c.src_slot >= 0 && c.src_slot < int32_t(kSlots + kCheckpoints) && c.dst_slot >= 0 &&
                  c.dst_slot < int32_t(kSlots + kCheckpoints) && c.src_slot != c.dst_slot,
              "a state copy is out of range" + where);
      memory[size_t(c.dst_slot)] = memory[size_t(c.src_slot)];
    }
    std::set<int32_t> held;
    for (const auto& [id, tokens] : seqs) {
      const int32_t slot = slot_of(kv, id);
      require(slot >= 0 && slot < int32_t(kSlots) && held.insert(slot).second, "sequence slots overlap or reach into checkpoints" + where);
      require(memory[size_t(slot)] == fold_all(tokens, tokens.size()), "sequence " + std::to_string(id) + " finds another state in its slot" + where);
    }
    const loom_kv_stats s = kv.stats();
    require(s.n_checkpoints_held <= kCheckpoints && s.n_state_free == kSlots - seqs.size(), "state or checkpoint counts do not add up" + where);
  }
  require(n_reuses > 20 && n_checkpoints > 20 && n_oom > 0,
          "the random run reused (" + std::to_string(n_reuses) + "), checkpointed (" + std::to_string(n_checkpoints) +
              ") or ran out of memory too rarely: it tests too little");
}

}  // namespace

std::vector<Case> kv_checkpoint_cases() {
  return {{"kv.state_checkpoints.basics", LOOM_PLUGIN_KIND_KV, case_checkpoint_basics},
          {"kv.state_checkpoints.recycling", LOOM_PLUGIN_KIND_KV, case_checkpoint_recycling},
          {"kv.state_checkpoints.random_ops", LOOM_PLUGIN_KIND_KV, case_checkpoint_random_run}};
}

}  // namespace loom::conformance
