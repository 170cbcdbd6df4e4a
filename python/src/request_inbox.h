// Where the engine's thread leaves request events for a Python thread to pick up. The engine calls
// push() from its loop (it must not block there); Python waits in wait() with the GIL released, a
// short while at a time, so Ctrl-C is noticed between waits. A batch's waiter only needs to wake
// when a request finishes (`wake_on_every_event` false): waking at every step would take a core from
// the engine's threads on a small machine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace loom::python {

class RequestInbox {
 public:
  explicit RequestInbox(bool wake_on_every_event) : wake_on_every_event_(wake_on_every_event) {}

  void push(size_t slot, const RequestEvent& event) {
    const bool wake = wake_on_every_event_ || event.finish != FinishReason::none;
    {
      std::lock_guard lock(mutex_);
      events_.emplace_back(slot, event);
      woken_ = woken_ || wake;
    }
    if (wake) ready_.notify_all();
  }

  // The events that arrived, waiting at most `timeout` for the first.
  std::vector<std::pair<size_t, RequestEvent>> wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return woken_; });
    woken_ = false;
    std::vector<std::pair<size_t, RequestEvent>> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::pair<size_t, RequestEvent>> events_;
  const bool wake_on_every_event_;
  bool woken_ = false;
};

}  // namespace loom::python
