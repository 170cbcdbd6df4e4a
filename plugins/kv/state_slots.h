// Per-sequence state slots (ABI 1.6): a fixed pool of indices, one held by each sequence of a model
// with recurrent layers. Only bookkeeping: the core owns the state memory. The lowest free slot is
// handed out first, so a run's slot numbers do not depend on how earlier slots were freed.
#pragma once

#include <cstdint>
#include <set>

namespace loom::kv {

class StateSlots {
 public:
  explicit StateSlots(uint32_t n_slots) : n_slots_(n_slots) {
    for (uint32_t i = 0; i < n_slots; ++i) free_.insert(static_cast<int32_t>(i));
  }

  bool enabled() const { return n_slots_ > 0; }
  uint32_t n_slots() const { return n_slots_; }
  uint32_t n_free() const { return static_cast<uint32_t>(free_.size()); }

  // The caller has checked n_free() > 0.
  int32_t take() {
    const int32_t slot = *free_.begin();
    free_.erase(free_.begin());
    return slot;
  }
  void give_back(int32_t slot) { free_.insert(slot); }

 private:
  uint32_t n_slots_ = 0;
  std::set<int32_t> free_;
};

}  // namespace loom::kv
