// Where the engine's thread leaves request events for a Python thread to pick up. The engine calls
// push() from its loop (it must not block there); Python waits in wait() with the GIL released, a
// short while at a time, so Ctrl-C is noticed between waits.
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
  void push(size_t slot, const RequestEvent& event) {
    {
      std::lock_guard lock(mutex_);
      events_.emplace_back(slot, event);
    }
    ready_.notify_all();
  }

  // The events that arrived, waiting at most `timeout` for the first.
  std::vector<std::pair<size_t, RequestEvent>> wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    std::vector<std::pair<size_t, RequestEvent>> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::pair<size_t, RequestEvent>> events_;
};

}  // namespace loom::python
