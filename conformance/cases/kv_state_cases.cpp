// Conformance cases for the KV allocator's per-sequence state slots (ABI 1.6): configuration,
// out-of-memory atomicity, fork, no prefix reuse, and a random run against a simulated model.
//
// The random run simulates the recurrent state a hybrid model keeps per sequence: a slot holds a
// fold (hash) of every token the sequence has seen, advanced as the core would advance it. Pending
// state copies (fork) are applied before each check. Every sequence must then find its own fold
// in its own slot: two sequences on one slot, a slot handed out twice, a missed or misdirected
// copy all show up, without looking inside the plugin.
#include <map>
#include <random>
#include <set>

#include "conformance_case.h"
#include "kv_support.h"

namespace loom::conformance {

namespace {

std::string state_config(uint32_t n_blocks, uint32_t block_size, uint32_t n_slots, bool prefix_caching = true) {
  return "{\"n_blocks\": " + std::to_string(n_blocks) + ", \"block_size\": " + std::to_string(block_size) +
         ", \"prefix_caching\": " + (prefix_caching ? "true" : "false") + ", \"n_state_slots\": " + std::to_string(n_slots) + "}";
}

// Skips plugins built against headers before 1.6 (their table ends before the state slots).
void require_state_slots(const CaseContext& ctx) {
  const loom_kv_i* table = ctx.plugin->kv();
  require(table != nullptr, "plugin has no kv table");
  if (!LOOM_HAS_MEMBER(table, loom_kv_i, take_pending_state_copies) || table->seq_state_slot == nullptr ||
      table->take_pending_state_copies == nullptr) {
    not_supported("the allocator has no state slots (ABI 1.6)");
  }
}

void case_state_slots_basics(CaseContext& ctx) {
  require_state_slots(ctx);
  {
    KvInstance plain(ctx, kv_config(8, 4, true));
    int32_t slot = 0;
    const std::vector<int32_t> prompt = iota_tokens(3, 1);
    uint32_t n_cached = 0;
    plain.ok(plain->seq_create(plain.get(), 1, prompt.data(), 3, &n_cached), "seq_create");
    require(plain->seq_state_slot(plain.get(), 1, &slot) == LOOM_STATUS_UNSUPPORTED,
            "seq_state_slot without state slots configured must be UNSUPPORTED");
    require(plain.stats().n_state_slots == 0, "n_state_slots must be 0 when none are configured");
  }
  KvInstance kv(ctx, state_config(16, 4, 2));
  require(kv.stats().n_state_slots == 2 && kv.stats().n_state_free == 2, "stats must report 2 free state slots");
  uint32_t n_cached = 0;
  const std::vector<int32_t> a = iota_tokens(6, 100), b = iota_tokens(5, 200);
  kv.ok(kv->seq_create(kv.get(), 1, a.data(), 6, &n_cached), "seq_create");
  kv.ok(kv->seq_create(kv.get(), 2, b.data(), 5, &n_cached), "seq_create");
  const int32_t s1 = slot_of(kv, 1), s2 = slot_of(kv, 2);
  require(s1 >= 0 && s1 < 2 && s2 >= 0 && s2 < 2 && s1 != s2, "two sequences must hold the two distinct slots");
  int32_t slot = 0;
  require(kv->seq_state_slot(kv.get(), 99, &slot) == LOOM_STATUS_NOT_FOUND, "an unknown sequence must be NOT_FOUND");

  // Out of slots: create and fork fail with OUT_OF_MEMORY and change nothing, though blocks are free.
  const loom_kv_stats before = kv.stats();
  require(kv->seq_create(kv.get(), 3, a.data(), 2, &n_cached) == LOOM_STATUS_OUT_OF_MEMORY,
          "seq_create with every state slot held must be OUT_OF_MEMORY");
  require(kv->seq_fork(kv.get(), 1, 4) == LOOM_STATUS_OUT_OF_MEMORY, "seq_fork with every state slot held must be OUT_OF_MEMORY");
  require(same_stats(before, kv.stats()) && kv.stats().n_state_free == 0, "a failed create or fork changed the stats");
  uint32_t n = 0;
  require(kv->seq_length(kv.get(), 3, &n) == LOOM_STATUS_NOT_FOUND && kv->seq_length(kv.get(), 4, &n) == LOOM_STATUS_NOT_FOUND,
          "a failed create or fork left a sequence behind");
  require(take_state_copies(kv).empty(), "a failed fork left a state copy behind");

  // Freeing returns the slot; a fork then gets a slot of its own and one copy from its source.
  kv.ok(kv->seq_free(kv.get(), 2), "seq_free");
  require(kv.stats().n_state_free == 1, "seq_free must return the state slot");
  kv.ok(kv->seq_fork(kv.get(), 1, 5), "seq_fork");
  const int32_t s5 = slot_of(kv, 5);
  require(s5 != s1 && s5 >= 0 && s5 < 2, "a forked sequence must hold its own slot");
  const auto copies = take_state_copies(kv);
  require(copies.size() == 1 && copies[0].src_slot == s1 && copies[0].dst_slot == s5,
          "a fork must queue exactly one state copy from the source's slot to the new one");
  require(take_state_copies(kv).empty(), "state copies must be forgotten once taken");

  // A fork freed before its copy ran leaves no copy behind.
  kv.ok(kv->seq_free(kv.get(), 5), "seq_free");
  kv.ok(kv->seq_fork(kv.get(), 1, 6), "seq_fork");
  kv.ok(kv->seq_free(kv.get(), 6), "seq_free");
  require(take_state_copies(kv).empty(), "a copy into a freed slot must be dropped");
  kv.ok(kv->seq_free(kv.get(), 1), "seq_free");
  const loom_kv_stats end = kv.stats();
  require(end.n_state_free == 2 && end.n_used == 0 && end.n_seqs == 0, "slots or blocks leaked after freeing everything");
}

void case_state_slots_no_prefix_reuse(CaseContext& ctx) {
  require_state_slots(ctx);
  KvInstance kv(ctx, state_config(32, 4, 4, true));
  const std::vector<int32_t> prompt = iota_tokens(17, 1);
  uint32_t n_cached = 99;
  kv.ok(kv->seq_create(kv.get(), 1, prompt.data(), 17, &n_cached), "seq_create");
  kv.ok(kv->seq_free(kv.get(), 1), "seq_free");
  uint32_t needed = 0;
  kv.ok(kv->blocks_needed(kv.get(), prompt.data(), 17, &needed), "blocks_needed");
  require(needed == 5, "with state slots blocks_needed must count every block (5), got " + std::to_string(needed));
  kv.ok(kv->seq_create(kv.get(), 2, prompt.data(), 17, &n_cached), "seq_create");
  require(n_cached == 0, "with state slots a repeated prompt must not reuse cached blocks (the state at their end was not kept)");
  require(kv.stats().prefix_hits == 0 && kv.stats().tokens_reused == 0, "with state slots nothing may count as reused");
}

void case_state_slots_random_run(CaseContext& ctx) {
  require_state_slots(ctx);
  constexpr uint32_t kSlots = 6, kBlocks = 40, kBlockSize = 4;
  KvInstance kv(ctx, state_config(kBlocks, kBlockSize, kSlots, true));
  std::mt19937 rng(2026);
  auto uniform = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  std::vector<uint64_t> memory(kSlots, 0);  // simulated state per slot
  std::map<uint64_t, uint64_t> expected;    // the fold each sequence's state must hold
  uint64_t next_id = 1;
  int32_t next_token = 1;
  int n_oom = 0, n_forks = 0;
  auto advance = [&](uint64_t seq_id, const std::vector<int32_t>& tokens) {
    uint64_t& state = memory[static_cast<size_t>(slot_of(kv, seq_id))];
    for (int32_t t : tokens) {
      state = fold(state, t);
      expected[seq_id] = fold(expected[seq_id], t);
    }
  };
  auto random_seq = [&] {
    auto it = expected.begin();
    std::advance(it, uniform(0, static_cast<uint32_t>(expected.size()) - 1));
    return it->first;
  };
  for (int op = 0; op < 3000; ++op) {
    const std::string where = " (op " + std::to_string(op) + ")";
    const uint32_t kind = expected.empty() ? 0 : uniform(0, 99);
    const loom_kv_stats before = kv.stats();
    std::vector<int32_t> tokens(uniform(1, 6));
    for (auto& t : tokens) t = next_token++;
    if (kind < 30) {  // create: a fresh sequence starts from a zero state
      const uint64_t id = next_id++;
      uint32_t n_cached = 0;
      const loom_status status = kv->seq_create(kv.get(), id, tokens.data(), static_cast<uint32_t>(tokens.size()), &n_cached);
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        require(same_stats(before, kv.stats()) && kv.stats().n_state_free == before.n_state_free, "a failed seq_create changed the stats" + where);
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_create");
      memory[static_cast<size_t>(slot_of(kv, id))] = 0;
      expected[id] = 0;
      advance(id, tokens);
    } else if (kind < 65) {  // append
      const uint64_t id = random_seq();
      const loom_status status = kv->seq_append(kv.get(), id, tokens.data(), static_cast<uint32_t>(tokens.size()));
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_append");
      advance(id, tokens);
    } else if (kind < 80) {  // fork: the copy brings the source's state along
      const uint64_t src = random_seq(), dst = next_id++;
      const loom_status status = kv->seq_fork(kv.get(), src, dst);
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        require(kv.stats().n_state_free == 0 || before.n_free == 0, "seq_fork ran out of memory with slots free" + where);
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_fork");
      expected[dst] = expected[src];
      ++n_forks;
    } else {  // free
      const uint64_t id = random_seq();
      kv.ok(kv->seq_free(kv.get(), id), "seq_free");
      expected.erase(id);
    }
    for (const loom_kv_state_copy& c : take_state_copies(kv)) {
      require(c.src_slot >= 0 && c.src_slot < int32_t(kSlots) && c.dst_slot >= 0 && c.dst_slot < int32_t(kSlots) && c.src_slot != c.dst_slot,
              "a state copy is out of range" + where);
      memory[static_cast<size_t>(c.dst_slot)] = memory[static_cast<size_t>(c.src_slot)];
    }
    std::set<int32_t> held;
    for (const auto& [id, fold_value] : expected) {
      const int32_t slot = slot_of(kv, id);
      require(held.insert(slot).second, "two sequences hold state slot " + std::to_string(slot) + where);
      require(memory[static_cast<size_t>(slot)] == fold_value, "sequence " + std::to_string(id) + " finds another state in its slot" + where);
    }
    const loom_kv_stats s = kv.stats();
    require(s.n_state_slots == kSlots && s.n_state_free == kSlots - expected.size(), "n_state_free does not add up" + where);
    require(s.prefix_hits == 0, "a prefix was reused with state slots" + where);
  }
  require(n_oom > 0 && n_forks > 0, "the random run never ran out of slots or never forked: it tests too little");
}

}  // namespace

std::vector<Case> kv_state_cases() {
  return {{"kv.state_slots.basics", LOOM_PLUGIN_KIND_KV, case_state_slots_basics},
          {"kv.state_slots.no_prefix_reuse", LOOM_PLUGIN_KIND_KV, case_state_slots_no_prefix_reuse},
          {"kv.state_slots.random_ops", LOOM_PLUGIN_KIND_KV, case_state_slots_random_run}};
}

}  // namespace loom::conformance
