// The engine's side of the prefix cache's disk tier (prefix_disk_tier.h): what names a block, when a
// computed block is written, and how an admitted sequence loads the blocks it finds there.
//
// Blocks are written as soon as their K/V is computed (LMCache's write-through), not when the memory
// pool evicts them: eviction happens inside the allocator as a new owner takes the block, and a
// server that stops or crashes would lose whatever had not been evicted yet. A block file holds every
// layer's K/V, the window-ring layers' too (their rows are still in the ring in the step that
// completes the block), so a sequence can resume at any block on disk: the pool layers get every
// block up to there, the ring only the last window. A hybrid model's recurrent state summarises its
// whole prefix, so it is written where the allocator checkpoints it (a prompt's last full block) and
// a sequence resumes only at a block whose state is on disk.
#include <algorithm>
#include <fstream>
#include <iostream>

#include "common/error.h"
#include "engine/engine.h"

namespace loom {

namespace {

// What the model file's K/V depend on, cheaply: its size, its head (metadata and tensor directory)
// and samples spread over its weights. A different model or fine-tune differs in them.
std::string model_identity(const std::filesystem::path& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  if (!in) throw Error("disk cache: cannot read the model file " + model_path.string());
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  std::string identity = "model bytes " + std::to_string(size) + "\n";
  constexpr uint64_t kHead = 4ull << 20, kSample = 64ull << 10, kSamples = 32;
  std::string chunk;
  auto take = [&](uint64_t at, uint64_t n) {
    n = std::min(n, size - std::min(at, size));
    chunk.resize(n);
    in.seekg(static_cast<std::streamoff>(at));
    in.read(chunk.data(), static_cast<std::streamsize>(n));
    identity += chunk;
  };
  take(0, kHead);
  for (uint64_t i = 1; i <= kSamples; ++i) take(size / (kSamples + 1) * i, kSample);
  return identity;
}

}  // namespace

void Engine::open_disk_tier(const Config& config, const std::filesystem::path& model_path) {
  if (config.kv.disk_cache_path.empty()) return;
  const uint64_t block_bytes = model_->kv_block_bytes(kv_cache_);
  disk_state_bytes_ = model_->state_slot_bytes(kv_cache_);
  if (disk_state_bytes_ > 0 && kv_->n_state_checkpoints() == 0) {
    std::cerr << "loom: warning: [kv] disk_cache_path is ignored for " << model_->info().arch_name
              << ": its recurrent state is saved where prefix caching checkpoints it, and prefix_caching or "
                 "state_checkpoints is off\n";
    return;
  }
  // Everything the bytes of a block depend on besides its tokens; a file made under another is foreign.
  const std::string identity = "loom kv blocks 1\nbackend " + backend_->name() + "\nkv dtype " + config.kv.dtype +
                               "\nblock size " + std::to_string(info_.kv_block_size) + "\nblock bytes " +
                               std::to_string(block_bytes) + "\nstate bytes " + std::to_string(disk_state_bytes_) + "\n" +
                               model_identity(model_path);
  disk_fingerprint_ = fingerprint_of(identity);
  disk_tier_ = std::make_unique<PrefixDiskTier>(config.kv.disk_cache_path, static_cast<uint64_t>(config.kv.disk_cache_bytes),
                                                disk_fingerprint_, std::vector<uint64_t>{block_bytes, disk_state_bytes_});
  disk_block_.resize(std::max(block_bytes, disk_state_bytes_));
  scheduler_->set_prefix_extender([this](Sequence& seq) { return load_prefix_from_disk(seq); });
  std::lock_guard lock(mutex_);
  stats_.disk_tier = true;
}

const std::vector<DiskBlockKey>& Engine::disk_keys(Sequence& seq, uint32_t n_blocks) const {
  const uint32_t bs = info_.kv_block_size;
  while (seq.disk_keys.size() < n_blocks) {
    const size_t b = seq.disk_keys.size();
    // An adapter's blocks chain from a root of their own: its KV differs for the same tokens.
    const int32_t adapter[2] = {int32_t(seq.lora_cache_key >> 32), int32_t(seq.lora_cache_key & 0xffffffffu)};
    const DiskBlockKey parent = b > 0 ? seq.disk_keys.back()
                                : seq.lora_cache_key == 0 ? disk_fingerprint_ : chain_block_key(disk_fingerprint_, adapter, 2);
    seq.disk_keys.push_back(chain_block_key(parent, seq.tokens.data() + b * bs, bs));
  }
  return seq.disk_keys;
}

// Resume past the memory cache's hit (seq.n_computed, a block boundary) at the deepest block the disk
// holds, keeping at least the last token to compute. Pool layers need every block from the hit on;
// window rings need the last window before the resume point, which may start below the hit (the
// allocator's ring checkpoint was copied in first, then partly overwritten with the same rows).
uint32_t Engine::load_prefix_from_disk(Sequence& seq) {
  const uint32_t bs = info_.kv_block_size;
  const uint32_t from = seq.n_computed / bs;
  const auto limit = static_cast<uint32_t>((seq.tokens.size() - 1) / bs);
  seq.n_disk_blocks = std::max(seq.n_disk_blocks, from);
  if (limit <= from) return seq.n_computed;
  const auto& keys = disk_keys(seq, limit);
  const bool rings = kv_cache_.has_window_rings();
  const uint32_t window = model_->info().sliding_window;
  auto ring_start = [&](uint32_t depth) { return depth * bs > window ? (depth * bs - window) / bs : 0u; };
  for (;;) {  // each failed read forgets a file, so this ends
    uint32_t depth = from;
    while (depth < limit && disk_tier_->contains(keys[depth])) ++depth;
    // A recurrent state resumes only where it was saved.
    while (disk_state_bytes_ > 0 && depth > from && !disk_tier_->contains(state_key_of(keys[depth - 1]))) --depth;
    if (rings) {
      // The deepest resume point whose window below the hit is on disk too.
      auto window_on_disk = [&](uint32_t d) {
        for (uint32_t b = ring_start(d); b < from; ++b) {
          if (!disk_tier_->contains(keys[b])) return false;
        }
        return true;
      };
      while (depth > from && !window_on_disk(depth)) --depth;
    }
    if (depth == from) return seq.n_computed;

    // The allocator's queued ring or state copy lands first, then the rows from disk.
    if (rings || disk_state_bytes_ > 0) run_pending_copies();
    const std::vector<int32_t> table = kv_->block_table(seq.id);
    const int32_t ring_slot = rings ? kv_->state_slot(seq.id) : -1;
    const uint32_t first = rings ? std::min(from, ring_start(depth)) : from;
    bool complete = true;
    for (uint32_t b = first; b < depth && complete; ++b) {
      uint32_t parts = b >= from ? Model::kv_pool_part : 0u;
      if (rings && b >= ring_start(depth)) parts |= Model::kv_ring_part;
      if (parts == 0) continue;
      complete = disk_tier_->read(keys[b], disk_block_.data(), model_->kv_block_bytes(kv_cache_));
      if (complete) model_->write_kv_block(kv_cache_, table.at(b), ring_slot, b * bs, disk_block_.data(), parts);
    }
    if (complete && disk_state_bytes_ > 0) {
      complete = disk_tier_->read(state_key_of(keys[depth - 1]), disk_block_.data(), disk_state_bytes_);
      if (complete) model_->write_state_slot(kv_cache_, kv_->state_slot(seq.id), disk_block_.data());
    }
    if (!complete) continue;
    seq.n_disk_blocks = std::max(seq.n_disk_blocks, depth);
    std::lock_guard lock(mutex_);
    stats_.disk_cached_tokens += uint64_t(depth - from) * bs;
    return depth * bs;
  }
}

// After the forward pass: every block it completed goes to disk (those already there are skipped).
// Rows computed this step are real tokens; drafts riding along are not, and never reach a full block here.
void Engine::save_blocks_to_disk(const SchedulerDecision& decision) {
  if (!disk_tier_) return;
  const uint32_t bs = info_.kv_block_size;
  for (const auto& chunk : decision.chunks) {
    Sequence& seq = *chunk.seq;
    const uint32_t end = (seq.n_computed + chunk.n_tokens) / bs;
    if (!seq.has_kv || end <= seq.n_disk_blocks) continue;
    const auto& keys = disk_keys(seq, end);
    const std::vector<int32_t> table = kv_->block_table(seq.id);
    const int32_t ring_slot = kv_cache_.has_window_rings() ? kv_->state_slot(seq.id) : -1;
    for (uint32_t b = seq.n_disk_blocks; b < end; ++b) {
      if (disk_tier_->contains(keys[b])) continue;
      std::vector<uint8_t> bytes(model_->kv_block_bytes(kv_cache_));
      model_->read_kv_block(kv_cache_, table.at(b), ring_slot, b * bs, bytes.data());
      disk_tier_->write_async(keys[b], std::move(bytes));
    }
    seq.n_disk_blocks = end;
  }
}

// A hybrid model's sequence whose recurrent state now covers exactly its first n_tokens (a block
// boundary the allocator checkpoints): that state goes to disk beside the blocks.
void Engine::save_state_to_disk(Sequence& seq, uint32_t n_tokens) {
  if (!disk_tier_ || disk_state_bytes_ == 0 || n_tokens == 0) return;
  const uint32_t n_blocks = n_tokens / info_.kv_block_size;
  const DiskBlockKey key = state_key_of(disk_keys(seq, n_blocks)[n_blocks - 1]);
  if (disk_tier_->contains(key)) return;
  std::vector<uint8_t> bytes(disk_state_bytes_);
  model_->read_state_slot(kv_cache_, kv_->state_slot(seq.id), bytes.data());
  disk_tier_->write_async(key, std::move(bytes));
}

}  // namespace loom
