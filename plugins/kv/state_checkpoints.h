// Recurrent-state checkpoints (ABI 1.7): a fixed pool of extra state slots, each attached to one
// registered prefix-cache block and holding the state of a hybrid model's recurrent layers at that
// block's end. Only bookkeeping: the core owns the state memory and performs the copies.
//
// A checkpoint is recycled least recently used (attached or reused) first when a new one is needed
// and all are held; it is dropped with its block's registration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

namespace loom::kv {

class StateCheckpoints {
 public:
  // Slots first_slot .. first_slot + n_slots - 1 (they follow the sequences' slots).
  StateCheckpoints(int32_t first_slot, uint32_t n_slots) : n_slots_(n_slots) {
    for (uint32_t i = 0; i < n_slots; ++i) free_.push_back(first_slot + static_cast<int32_t>(n_slots - 1 - i));
  }

  bool enabled() const { return n_slots_ > 0; }
  uint32_t n_slots() const { return n_slots_; }
  uint32_t n_held() const { return static_cast<uint32_t>(by_block_.size()); }

  // The slot holding the state at the end of `block_id`, if any.
  std::optional<int32_t> slot_of(int32_t block_id) const {
    auto it = by_block_.find(block_id);
    if (it == by_block_.end()) return std::nullopt;
    return it->second.slot;
  }

  // Mark a checkpoint as just used (a prefix hit), so it is recycled last.
  void touch(int32_t block_id) {
    auto it = by_block_.find(block_id);
    if (it == by_block_.end()) return;
    by_tick_.erase(it->second.tick);
    it->second.tick = ++clock_;
    by_tick_[it->second.tick] = block_id;
  }

  // Attach a slot to `block_id` (which holds none): a free one, else the one least recently used,
  // taken from its block.
  int32_t attach(int32_t block_id) {
    if (free_.empty()) detach(by_tick_.begin()->second);
    const int32_t slot = free_.back();
    free_.pop_back();
    by_block_[block_id] = {slot, ++clock_};
    by_tick_[clock_] = block_id;
    return slot;
  }

  // Drop the checkpoint of `block_id` (no-op when it has none).
  void detach(int32_t block_id) {
    auto it = by_block_.find(block_id);
    if (it == by_block_.end()) return;
    by_tick_.erase(it->second.tick);
    free_.push_back(it->second.slot);
    by_block_.erase(it);
  }

  // The block whose checkpoint lives in `slot`, if any.
  std::optional<int32_t> block_of_slot(int32_t slot) const {
    for (const auto& [block, entry] : by_block_) {
      if (entry.slot == slot) return block;
    }
    return std::nullopt;
  }

 private:
  struct Entry {
    int32_t slot = -1;
    uint64_t tick = 0;
  };
  uint32_t n_slots_ = 0;
  uint64_t clock_ = 0;
  std::vector<int32_t> free_;                   // lowest slot at the back
  std::unordered_map<int32_t, Entry> by_block_;  // block id -> its checkpoint
  std::map<uint64_t, int32_t> by_tick_;          // last use -> block id, oldest first
};

}  // namespace loom::kv
