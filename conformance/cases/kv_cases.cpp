// Conformance cases for the kv kind: configuration, error codes, out-of-memory atomicity, prefix
// caching, copy-on-write, and a long random run checked against a model of the expected state.
//
// The random run simulates KV memory: an array with one slot per (block, position) into which
// the test "computes" each token as the core would (writing the token id itself), after performing
// the pending copies the allocator reported. Every sequence must then read its own tokens back
// through its block table. This catches a block shared without fork/prefix reuse, a missing
// copy-on-write, a wrong prefix-cache hit and a wrong copy, without looking inside the plugin.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "conformance_case.h"
#include "kv_support.h"

namespace loom::conformance {

namespace {

// ---- configuration and error codes --------------------------------------------------------------

void case_bad_config(CaseContext& ctx) {
  const loom_kv_i* t = ctx.plugin->kv();
  require(t != nullptr, "plugin has no kv table");
  struct Bad {
    const char* config;
    const char* must_mention;  // the key the message must name
  };
  const Bad bad[] = {
      {"{\"n_blocks\": 0}", "n_blocks"},          {"{\"n_blocks\": -5}", "n_blocks"},
      {"{\"n_blocks\": \"many\"}", "n_blocks"},   {"{\"block_size\": 0}", "block_size"},
      {"{\"block_size\": 1.5}", "block_size"},    {"{\"prefix_caching\": 3}", "prefix_caching"},
      {"{\"n_blokcs\": 16}", "n_blokcs"},         {"not json at all", ""},
      {"[1, 2, 3]", ""},
  };
  for (const Bad& b : bad) {
    char error[LOOM_ERROR_BUFFER_SIZE] = {};
    loom_kv_t* kv = nullptr;
    const loom_status status = t->create(ctx.host, b.config, &kv, error, sizeof(error));
    if (kv != nullptr) t->destroy(kv);
    require(status == LOOM_STATUS_INVALID_ARGUMENT,
            std::string("config ") + b.config + " gave status " + status_text(status) + ", expected INVALID_ARGUMENT");
    require(error[0] != '\0', std::string("config ") + b.config + " was refused without a message");
    require(std::strstr(error, b.must_mention) != nullptr,
            std::string("message for config ") + b.config + " does not name \"" + b.must_mention + "\": " + error);
  }
  KvInstance good(ctx, kv_config(32, 8, true));
  const loom_kv_stats s = good.stats();
  require(s.n_blocks == 32 && s.block_size == 8 && s.n_free == 32 && s.n_used == 0 && s.n_seqs == 0,
          "a fresh allocator does not report the configured, empty pool");
}

void case_unknown_sequence(CaseContext& ctx) {
  KvInstance kv(ctx, kv_config(16, 4, true));
  const int32_t token = 7;
  uint32_t n = 0;
  int32_t table[4];
  auto expect_not_found = [&](loom_status status, const char* slot) {
    require(status == LOOM_STATUS_NOT_FOUND,
            std::string(slot) + " on an unknown sequence returned " + status_text(status) + ", expected NOT_FOUND");
    require(std::strlen(kv->last_error(kv.get())) > 0, std::string(slot) + " failed without a last_error message");
  };
  expect_not_found(kv->seq_append(kv.get(), 42, &token, 1), "seq_append");
  expect_not_found(kv->seq_truncate(kv.get(), 42, 0), "seq_truncate");
  expect_not_found(kv->seq_fork(kv.get(), 42, 43), "seq_fork");
  expect_not_found(kv->seq_free(kv.get(), 42), "seq_free");
  expect_not_found(kv->seq_block_table(kv.get(), 42, table, 4, &n), "seq_block_table");
  expect_not_found(kv->seq_length(kv.get(), 42, &n), "seq_length");

  const std::vector<int32_t> prompt = iota_tokens(6, 100);
  kv.ok(kv->seq_create(kv.get(), 1, prompt.data(), 6, &n), "seq_create");
  require(kv->seq_create(kv.get(), 1, prompt.data(), 6, &n) == LOOM_STATUS_INVALID_ARGUMENT,
          "creating an existing sequence id again must be INVALID_ARGUMENT");
  require(kv->seq_fork(kv.get(), 1, 1) == LOOM_STATUS_INVALID_ARGUMENT,
          "forking onto an existing sequence id must be INVALID_ARGUMENT");
  require(kv->seq_truncate(kv.get(), 1, 7) != LOOM_STATUS_OK, "truncating to more tokens than held must fail");
  require(kv.length(1) == 6, "a failed call changed the sequence length");
  kv.ok(kv->seq_free(kv.get(), 1), "seq_free");
  expect_not_found(kv->seq_free(kv.get(), 1), "seq_free (twice)");
}

// ---- out of memory ------------------------------------------------------------------------------

void case_oom_leaves_state_unchanged(CaseContext& ctx) {
  KvInstance kv(ctx, kv_config(8, 4, true));
  uint32_t n_cached = 0;
  const std::vector<int32_t> too_long = iota_tokens(33, 0);  // 9 blocks > 8
  loom_kv_stats before = kv.stats();
  require(kv->seq_create(kv.get(), 1, too_long.data(), 33, &n_cached) == LOOM_STATUS_OUT_OF_MEMORY,
          "a prompt larger than the pool must be OUT_OF_MEMORY");
  require(same_stats(before, kv.stats()), "a failed seq_create changed the allocator's stats");
  uint32_t n = 0;
  require(kv->seq_length(kv.get(), 1, &n) == LOOM_STATUS_NOT_FOUND, "a failed seq_create left the sequence behind");

  const std::vector<int32_t> a = iota_tokens(14, 1000);  // 4 blocks, last one partial
  kv.ok(kv->seq_create(kv.get(), 1, a.data(), 14, &n_cached), "seq_create");
  kv.ok(kv->seq_fork(kv.get(), 1, 2), "seq_fork");
  const std::vector<int32_t> b = iota_tokens(11, 5000);  // 3 blocks
  kv.ok(kv->seq_create(kv.get(), 3, b.data(), 11, &n_cached), "seq_create");
  // Pool: 4 + 3 = 7 used, 1 free. Appending 7 tokens to seq 2 needs a copy-on-write block plus
  // two more blocks: 3 > 1.
  before = kv.stats();
  const std::vector<int32_t> table_before = kv.block_table(2);
  const std::vector<int32_t> more = iota_tokens(7, 9000);
  require(kv->seq_append(kv.get(), 2, more.data(), 7) == LOOM_STATUS_OUT_OF_MEMORY,
          "an append larger than the free pool must be OUT_OF_MEMORY");
  require(same_stats(before, kv.stats()), "a failed seq_append changed the allocator's stats");
  require(kv.length(2) == 14 && kv.block_table(2) == table_before, "a failed seq_append changed the sequence");
  require(kv.take_copies().empty(), "a failed seq_append left a pending copy behind");
  // An append that fits exactly (copy-on-write block only) still works.
  kv.ok(kv->seq_append(kv.get(), 2, more.data(), 2), "seq_append that fits");
  require(kv.stats().n_free == 0, "copy-on-write of a shared partial block must take exactly one block");
  kv.ok(kv->seq_free(kv.get(), 1), "seq_free");
  kv.ok(kv->seq_free(kv.get(), 2), "seq_free");
  kv.ok(kv->seq_free(kv.get(), 3), "seq_free");
  const loom_kv_stats end = kv.stats();
  require(end.n_free == end.n_blocks && end.n_used == 0 && end.n_seqs == 0, "blocks leaked after freeing everything");
}

// ---- prefix caching ------------------------------------------------------------------------------

void case_prefix_cache_hits(CaseContext& ctx) {
  const uint32_t bs = 4;
  KvInstance kv(ctx, kv_config(64, bs, true));
  uint32_t n_cached = 99;
  const std::vector<int32_t> prompt = iota_tokens(10, 1);  // 2 full blocks + 2 tokens
  kv.ok(kv->seq_create(kv.get(), 1, prompt.data(), 10, &n_cached), "seq_create");
  require(n_cached == 0, "the first prompt cannot have cached tokens");

  uint32_t needed = 0;
  kv.ok(kv->blocks_needed(kv.get(), prompt.data(), 10, &needed), "blocks_needed");
  require(needed == 1, "an equal prompt whose 2 full blocks are cached needs 1 new block, got " + std::to_string(needed));
  const loom_kv_stats s0 = kv.stats();
  kv.ok(kv->seq_create(kv.get(), 2, prompt.data(), 10, &n_cached), "seq_create (equal prompt)");
  require(n_cached == 8, "an equal prompt must reuse its 2 full blocks (8 tokens), got " + std::to_string(n_cached));
  const loom_kv_stats s1 = kv.stats();
  require(s1.prefix_hits - s0.prefix_hits == 2 && s1.tokens_reused - s0.tokens_reused == 8,
          "prefix_hits/tokens_reused do not count the reuse");
  require(s0.n_free - s1.n_free == needed, "n_free did not drop by blocks_needed");
  const std::vector<int32_t> t1 = kv.block_table(1), t2 = kv.block_table(2);
  require(t1[0] == t2[0] && t1[1] == t2[1] && t1[2] != t2[2], "the shared prefix must map to the same blocks");

  // First block differs: the chain breaks at once, even though block 2 is equal.
  std::vector<int32_t> other = prompt;
  other[0] = 999;
  kv.ok(kv->seq_create(kv.get(), 3, other.data(), 10, &n_cached), "seq_create (different first block)");
  require(n_cached == 0, "a prompt with a different first block must not hit (hash must chain over the prefix)");
  // Same tokens in another order inside a block: must miss.
  std::vector<int32_t> permuted = prompt;
  std::swap(permuted[0], permuted[1]);
  kv.ok(kv->seq_create(kv.get(), 4, permuted.data(), 10, &n_cached), "seq_create (permuted block)");
  require(n_cached == 0, "a block with the same tokens in another order must not hit");
  // Second block differs: exactly one hit.
  std::vector<int32_t> half = prompt;
  half[5] = -3;
  kv.ok(kv->seq_create(kv.get(), 5, half.data(), 10, &n_cached), "seq_create (different second block)");
  require(n_cached == 4, "a prompt equal in its first block only must reuse 4 tokens, got " + std::to_string(n_cached));

  // A prompt made only of cached full blocks still computes its last token: its last block is
  // recomputed (never all tokens cached).
  const std::vector<int32_t> exact(prompt.begin(), prompt.begin() + 8);
  kv.ok(kv->seq_create(kv.get(), 6, exact.data(), 8, &n_cached), "seq_create (fully cached prompt)");
  require(n_cached == 4, "a fully cached 2-block prompt must report 4 cached tokens (< 8), got " + std::to_string(n_cached));

  // Freed sequences leave their full blocks cached; reuse revives them.
  for (uint64_t id = 1; id <= 6; ++id) kv.ok(kv->seq_free(kv.get(), id), "seq_free");
  const loom_kv_stats s2 = kv.stats();
  require(s2.n_used == 0 && s2.n_free == s2.n_blocks, "blocks leaked after freeing everything");
  require(s2.n_cached > 0, "freed full blocks must stay cached for reuse");
  kv.ok(kv->seq_create(kv.get(), 7, prompt.data(), 10, &n_cached), "seq_create (after free)");
  require(n_cached == 8, "a freed prompt's blocks must still hit, got " + std::to_string(n_cached));
  kv.ok(kv->seq_free(kv.get(), 7), "seq_free");

  // Fill the pool with other content: LRU eviction must eventually drop the old prefix, and a
  // create must succeed by evicting (cached blocks count as free).
  std::vector<int32_t> filler = iota_tokens(64 * bs - 1, 100000);
  kv.ok(kv->seq_create(kv.get(), 8, filler.data(), static_cast<uint32_t>(filler.size()), &n_cached),
        "seq_create that needs every block (evicting the cache)");
  require(kv.stats().n_free == 0 && kv.stats().n_cached == 0, "a full pool must have no free or cached blocks");
  kv.ok(kv->seq_free(kv.get(), 8), "seq_free");
  kv.ok(kv->seq_create(kv.get(), 9, prompt.data(), 10, &n_cached), "seq_create (after eviction)");
  require(n_cached == 0, "evicted blocks must not hit");
  kv.ok(kv->seq_free(kv.get(), 9), "seq_free");
}

void case_prefix_cache_disabled(CaseContext& ctx) {
  KvInstance kv(ctx, kv_config(32, 4, false));
  const std::vector<int32_t> prompt = iota_tokens(13, 1);
  uint32_t n_cached = 99;
  kv.ok(kv->seq_create(kv.get(), 1, prompt.data(), 13, &n_cached), "seq_create");
  kv.ok(kv->seq_create(kv.get(), 2, prompt.data(), 13, &n_cached), "seq_create");
  require(n_cached == 0, "with prefix_caching false nothing may hit");
  kv.ok(kv->seq_free(kv.get(), 1), "seq_free");
  kv.ok(kv->seq_free(kv.get(), 2), "seq_free");
  const loom_kv_stats s = kv.stats();
  require(s.prefix_hits == 0 && s.n_cached == 0 && s.n_free == 32, "with prefix_caching false nothing is cached");
}

// ---- fork and copy-on-write -----------------------------------------------------------------------

void case_fork_copy_on_write(CaseContext& ctx) {
  KvInstance kv(ctx, kv_config(16, 4, true));
  const std::vector<int32_t> prompt = iota_tokens(6, 1);  // blocks: [1 2 3 4] [5 6 . .]
  uint32_t n_cached = 0;
  kv.ok(kv->seq_create(kv.get(), 1, prompt.data(), 6, &n_cached), "seq_create");
  kv.ok(kv->seq_fork(kv.get(), 1, 2), "seq_fork");
  require(kv.block_table(1) == kv.block_table(2), "a fork must share every block");
  require(kv.stats().n_used == 2, "a fork must not allocate");
  const int32_t token = 77;
  kv.ok(kv->seq_append(kv.get(), 2, &token, 1), "seq_append into the shared partial block");
  const std::vector<int32_t> t1 = kv.block_table(1), t2 = kv.block_table(2);
  require(t1[0] == t2[0] && t1[1] != t2[1], "appending into a shared partial block must copy it");
  const std::vector<loom_kv_block_copy> copies = kv.take_copies();
  require(copies.size() == 1 && copies[0].src_block == t1[1] && copies[0].dst_block == t2[1] &&
              copies[0].n_tokens == 2,
          "expected one pending copy {src=old block, dst=new block, n_tokens=2}");
  // The original owner now holds the block alone: appending needs no copy.
  kv.ok(kv->seq_append(kv.get(), 1, &token, 1), "seq_append (now exclusive)");
  require(kv.take_copies().empty() && kv.block_table(1) == t1, "an exclusive partial block must be written in place");
  // Appending at a block boundary of a shared full block allocates a fresh block, no copy.
  kv.ok(kv->seq_truncate(kv.get(), 1, 4), "seq_truncate");
  kv.ok(kv->seq_fork(kv.get(), 1, 3), "seq_fork");
  kv.ok(kv->seq_append(kv.get(), 3, &token, 1), "seq_append at a block boundary");
  require(kv.take_copies().empty(), "a shared full block is never copied");
  for (uint64_t id = 1; id <= 3; ++id) kv.ok(kv->seq_free(kv.get(), id), "seq_free");
  require(kv.stats().n_used == 0, "blocks leaked");
}

// ---- the random run -------------------------------------------------------------------------------

struct RandomRunConfig {
  uint32_t n_blocks;
  uint32_t block_size;
  bool prefix_caching;
  int n_ops;
  uint32_t seed;
};

void random_run(CaseContext& ctx, const RandomRunConfig& rc) {
  KvInstance kv(ctx, kv_config(rc.n_blocks, rc.block_size, rc.prefix_caching));
  const uint32_t bs = rc.block_size;
  std::mt19937 rng(rc.seed);
  auto uniform = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  int32_t next_token = 1;  // fresh tokens are unique, so a wrongly shared block is always visible
  auto fresh = [&](uint32_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = next_token++;
    return t;
  };
  // "Documents" that prompts start from, so equal prefixes (and prefix hits) occur often.
  std::vector<std::vector<int32_t>> documents;
  for (int i = 0; i < 6; ++i) documents.push_back(fresh(bs * 6 + 3));

  std::vector<int32_t> memory(static_cast<size_t>(rc.n_blocks) * bs, -1);  // simulated KV content
  std::map<uint64_t, std::vector<int32_t>> model;                        // expected tokens per sequence
  uint64_t next_id = 1;
  uint64_t expected_reused = 0;
  int n_hits_seen = 0, n_oom = 0, n_cow = 0;

  auto write = [&](uint64_t seq_id, uint32_t from) {
    const std::vector<int32_t> table = kv.block_table(seq_id);
    const std::vector<int32_t>& tokens = model[seq_id];
    for (size_t pos = from; pos < tokens.size(); ++pos) {
      memory[static_cast<size_t>(table[pos / bs]) * bs + pos % bs] = tokens[pos];
    }
  };
  auto apply_copies = [&] {
    for (const loom_kv_block_copy& c : kv.take_copies()) {
      require(c.src_block >= 0 && c.src_block < static_cast<int32_t>(rc.n_blocks) && c.dst_block >= 0 &&
                  c.dst_block < static_cast<int32_t>(rc.n_blocks) && c.src_block != c.dst_block && c.n_tokens <= bs,
              "a pending copy is out of range");
      std::copy_n(memory.begin() + static_cast<ptrdiff_t>(c.src_block) * bs, c.n_tokens,
                  memory.begin() + static_cast<ptrdiff_t>(c.dst_block) * bs);
      ++n_cow;
    }
  };
  auto verify = [&](int op) {
    const std::string where = " (op " + std::to_string(op) + ")";
    std::set<int32_t> distinct;
    for (const auto& [seq_id, tokens] : model) {
      require(kv.length(seq_id) == tokens.size(), "sequence length differs from the model" + where);
      const std::vector<int32_t> table = kv.block_table(seq_id);
      require(table.size() == (tokens.size() + bs - 1) / bs, "block table length is not ceil(n_tokens / block_size)" + where);
      for (size_t pos = 0; pos < tokens.size(); ++pos) {
        const int32_t block = table[pos / bs];
        require(block >= 0 && block < static_cast<int32_t>(rc.n_blocks), "block id out of range" + where);
        require(memory[static_cast<size_t>(block) * bs + pos % bs] == tokens[pos],
                "sequence " + std::to_string(seq_id) + " reads a wrong token at position " + std::to_string(pos) +
                    " through its block table" + where);
      }
      distinct.insert(table.begin(), table.end());
    }
    const loom_kv_stats s = kv.stats();
    require(s.n_used == distinct.size(), "n_used (" + std::to_string(s.n_used) + ") is not the number of referenced blocks (" +
                                             std::to_string(distinct.size()) + ")" + where);
    require(s.n_used + s.n_free == s.n_blocks && s.n_cached <= s.n_free, "free-block accounting is inconsistent" + where);
    require(s.n_seqs == model.size(), "n_seqs differs from the model" + where);
    require(s.tokens_reused == expected_reused && s.tokens_reused == s.prefix_hits * bs,
            "tokens_reused does not add up" + where);
    if (!rc.prefix_caching) require(s.n_cached == 0 && s.prefix_hits == 0, "cache used while disabled" + where);
  };
  auto random_seq = [&] {
    auto it = model.begin();
    std::advance(it, uniform(0, static_cast<uint32_t>(model.size()) - 1));
    return it->first;
  };

  for (int op = 0; op < rc.n_ops; ++op) {
    const uint32_t kind = model.empty() ? 0 : uniform(0, 99);
    const loom_kv_stats before = kv.stats();
    if (kind < 25) {  // create
      std::vector<int32_t> prompt;
      if (uniform(0, 2) > 0) {
        const auto& doc = documents[uniform(0, static_cast<uint32_t>(documents.size()) - 1)];
        prompt.assign(doc.begin(), doc.begin() + uniform(1, static_cast<uint32_t>(doc.size())));
      }
      const auto tail = fresh(uniform(prompt.empty() ? 1 : 0, bs * 2));
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      uint32_t needed = 0;
      kv.ok(kv->blocks_needed(kv.get(), prompt.data(), static_cast<uint32_t>(prompt.size()), &needed), "blocks_needed");
      uint32_t n_cached = 0;
      const uint64_t id = next_id++;
      const loom_status status = kv->seq_create(kv.get(), id, prompt.data(), static_cast<uint32_t>(prompt.size()), &n_cached);
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        require(needed > before.n_free, "seq_create ran out of memory although blocks_needed <= n_free");
        require(same_stats(before, kv.stats()), "a failed seq_create changed the stats");
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_create");
      require(needed <= before.n_free && before.n_free - kv.stats().n_free == needed,
              "n_free did not drop by exactly blocks_needed");
      require(n_cached % bs == 0 && n_cached < prompt.size(), "n_cached must be a multiple of block_size and < n_tokens");
      if (!rc.prefix_caching) require(n_cached == 0, "a hit with prefix caching disabled");
      if (n_cached > 0) ++n_hits_seen;
      expected_reused += n_cached;
      model[id] = prompt;
      apply_copies();
      write(id, n_cached);  // the cached positions are NOT written: they must already be right
    } else if (kind < 60) {  // append
      const uint64_t id = random_seq();
      const auto tokens = fresh(uniform(1, bs + 3));
      const std::vector<int32_t> table_before = kv.block_table(id);
      const loom_status status = kv->seq_append(kv.get(), id, tokens.data(), static_cast<uint32_t>(tokens.size()));
      if (status == LOOM_STATUS_OUT_OF_MEMORY) {
        require(same_stats(before, kv.stats()) && kv.block_table(id) == table_before,
                "a failed seq_append changed the state");
        require(kv.take_copies().empty(), "a failed seq_append left a pending copy");
        ++n_oom;
        continue;
      }
      kv.ok(status, "seq_append");
      const uint32_t old_len = static_cast<uint32_t>(model[id].size());
      model[id].insert(model[id].end(), tokens.begin(), tokens.end());
      apply_copies();
      write(id, old_len);
    } else if (kind < 72) {  // fork
      const uint64_t src = random_seq();
      const uint64_t dst = next_id++;
      kv.ok(kv->seq_fork(kv.get(), src, dst), "seq_fork");
      require(kv.stats().n_free == before.n_free, "seq_fork must not allocate");
      model[dst] = model[src];
    } else if (kind < 85) {  // truncate (speculative-decoding rollback)
      const uint64_t id = random_seq();
      const uint32_t len = static_cast<uint32_t>(model[id].size());
      const uint32_t keep = len - uniform(0, std::min<uint32_t>(len, bs + 2));
      kv.ok(kv->seq_truncate(kv.get(), id, keep), "seq_truncate");
      model[id].resize(keep);
    } else {  // free
      const uint64_t id = random_seq();
      kv.ok(kv->seq_free(kv.get(), id), "seq_free");
      model.erase(id);
    }
    apply_copies();
    verify(op);
  }
  for (const auto& entry : model) kv.ok(kv->seq_free(kv.get(), entry.first), "seq_free");
  const loom_kv_stats end = kv.stats();
  require(end.n_free == end.n_blocks && end.n_used == 0 && end.n_seqs == 0,
          "blocks leaked: " + std::to_string(end.n_free) + " of " + std::to_string(end.n_blocks) + " free at the end");
  if (rc.prefix_caching) require(n_hits_seen > 0, "the random run never produced a prefix hit (case is not exercising it)");
  require(n_oom > 0, "the random run never ran out of memory (case is not exercising it)");
  require(n_cow > 0, "the random run never copied on write (case is not exercising it)");
}

// ABI 1.4 events: a subscriber that only sees the events must know the prefix cache exactly. The
// mirror is rebuilt from BlockStored/BlockRemoved; before every seq_create it predicts how many
// leading tokens the allocator will reuse (the chain of announced blocks equal to the prompt), and
// the allocator must reuse exactly that. A second sink set mid-run must be told every cached block.
struct EventMirror {
  struct Block {
    std::optional<uint64_t> parent;
    std::vector<int32_t> tokens;
  };
  std::map<uint64_t, Block> blocks;
  uint64_t n_removed = 0;
  std::string error;
  static void on_events(void* user, const loom_kv_event* events, uint32_t n) {
    auto* self = static_cast<EventMirror*>(user);
    for (uint32_t i = 0; i < n; ++i) self->apply(events[i]);
  }
  void apply(const loom_kv_event& e) {
    if (!error.empty()) return;
    if (e.type == LOOM_KV_EVENT_BLOCK_STORED) {
      if (blocks.count(e.block_hash)) error = "BlockStored for a hash already stored";
      else if (e.has_parent && !blocks.count(e.parent_hash)) error = "BlockStored whose parent was never stored";
      else blocks[e.block_hash] = {e.has_parent ? std::optional<uint64_t>(e.parent_hash) : std::nullopt,
                                   std::vector<int32_t>(e.tokens, e.tokens + e.n_tokens)};
    } else if (e.type == LOOM_KV_EVENT_BLOCK_REMOVED) {
      if (!blocks.erase(e.block_hash)) error = "BlockRemoved for a hash not stored";
      ++n_removed;
    } else if (e.type == LOOM_KV_EVENT_ALL_BLOCKS_CLEARED) {
      blocks.clear();
    } else {
      error = "unknown event type " + std::to_string(e.type);
    }
  }
  // Leading blocks of `prompt` (at most `limit`) that the announced blocks chain up to.
  uint32_t cached_blocks(const std::vector<int32_t>& prompt, uint32_t bs, uint32_t limit) const {
    std::optional<uint64_t> parent;
    uint32_t n = 0;
    while (n < limit) {
      const std::vector<int32_t> want(prompt.begin() + n * bs, prompt.begin() + (n + 1) * bs);
      auto it = std::find_if(blocks.begin(), blocks.end(),
                             [&](const auto& b) { return b.second.parent == parent && b.second.tokens == want; });
      if (it == blocks.end()) break;
      parent = it->first;
      ++n;
    }
    return n;
  }
};

void case_events_mirror_prefix_cache(CaseContext& ctx) {
  const loom_kv_i* table = ctx.plugin->kv();
  if (!LOOM_HAS_MEMBER(table, loom_kv_i, set_event_sink) || table->set_event_sink == nullptr) {
    not_supported("no set_event_sink: the allocator publishes no prefix-cache events (ABI < 1.4)");
  }
  const uint32_t bs = 4;
  KvInstance kv(ctx, R"({"n_blocks": 24, "block_size": 4, "prefix_caching": true})");
  EventMirror mirror;
  kv.ok(kv->set_event_sink(kv.get(), &EventMirror::on_events, &mirror), "set_event_sink");
  std::mt19937 rng(2204);
  // Prompts drawn from a few shared beginnings so the cache is hit, filled and evicted.
  std::vector<std::vector<int32_t>> stems;
  for (int s = 0; s < 4; ++s) {
    std::vector<int32_t> stem;
    for (int i = 0; i < 12; ++i) stem.push_back(int32_t(rng() % 50));
    stems.push_back(stem);
  }
  std::vector<uint64_t> live;
  uint32_t n_hits = 0;
  for (uint64_t op = 0; op < 400; ++op) {
    if (live.size() >= 3 || (!live.empty() && rng() % 3 == 0)) {
      const size_t i = rng() % live.size();
      kv.ok(kv->seq_free(kv.get(), live[i]), "seq_free");
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    std::vector<int32_t> prompt = stems[rng() % stems.size()];
    prompt.resize(4 + rng() % 12);
    for (int i = 0, extra = int(rng() % 9); i < extra; ++i) prompt.push_back(int32_t(50 + rng() % 200));
    const uint32_t predicted = mirror.cached_blocks(prompt, bs, (uint32_t(prompt.size()) - 1) / bs) * bs;
    uint32_t n_cached = 0;
    const loom_status status = kv->seq_create(kv.get(), op, prompt.data(), uint32_t(prompt.size()), &n_cached);
    if (status == LOOM_STATUS_OUT_OF_MEMORY) continue;
    kv.ok(status, "seq_create");
    require(mirror.error.empty(), "events: " + mirror.error);
    require(n_cached == predicted, "seq_create reused " + std::to_string(n_cached) + " tokens; the events announced " +
                                       std::to_string(predicted) + " cached for this prompt");
    if (n_cached > 0) ++n_hits;
    live.push_back(op);
    if (op == 200) {
      // A late subscriber is told the whole cache.
      EventMirror late;
      kv.ok(kv->set_event_sink(kv.get(), &EventMirror::on_events, &late), "set_event_sink (again)");
      require(late.error.empty(), "announcement: " + late.error);
      require(late.blocks.size() == mirror.blocks.size(), "a new sink was told " + std::to_string(late.blocks.size()) +
                                                              " cached blocks, the first one knows " +
                                                              std::to_string(mirror.blocks.size()));
      // Back to the first mirror, rebuilt from the announcement alone.
      mirror.blocks.clear();
      kv.ok(kv->set_event_sink(kv.get(), &EventMirror::on_events, &mirror), "set_event_sink (back)");
      require(mirror.blocks.size() == late.blocks.size(), "the announcement differs between two sinks");
    }
  }
  require(mirror.error.empty(), "events: " + mirror.error);
  require(n_hits > 0, "the run never reused a prefix (case is not exercising it)");
  require(mirror.n_removed > 0, "the run never evicted a cached block (case is not exercising it)");
  kv.ok(kv->set_event_sink(kv.get(), nullptr, nullptr), "set_event_sink(NULL)");
  for (uint64_t id : live) kv.ok(kv->seq_free(kv.get(), id), "seq_free");
}

}  // namespace

std::vector<Case> kv_cases() {
  std::vector<Case> cases;
  auto add = [&](std::string name, std::function<void(CaseContext&)> run) {
    cases.push_back({std::move(name), LOOM_PLUGIN_KIND_KV, std::move(run)});
  };
  add("kv.bad_config", case_bad_config);
  add("kv.unknown_sequence", case_unknown_sequence);
  add("kv.oom_leaves_state_unchanged", case_oom_leaves_state_unchanged);
  add("kv.prefix_cache_hits", case_prefix_cache_hits);
  add("kv.prefix_cache_disabled", case_prefix_cache_disabled);
  add("kv.fork_copy_on_write", case_fork_copy_on_write);
  add("kv.random_ops_small_blocks", [](CaseContext& ctx) { random_run(ctx, {48, 4, true, 6000, 1234}); });
  add("kv.random_ops_block16", [](CaseContext& ctx) { random_run(ctx, {40, 16, true, 4000, 99}); });
  add("kv.events_mirror_prefix_cache", case_events_mirror_prefix_cache);
  add("kv.random_ops_no_prefix_cache", [](CaseContext& ctx) { random_run(ctx, {32, 8, false, 3000, 7}); });
  for (Case& c : kv_state_cases()) cases.push_back(std::move(c));
  for (Case& c : kv_checkpoint_cases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace loom::conformance
