// EventChannel — hands RequestEvents from the engine thread to the HTTP thread that owns the request.
// push() only locks, appends and notifies, so the engine thread never waits on a slow client.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "engine/request.h"

namespace loom::server {

struct ChoiceEvent {
  size_t choice = 0;  // index into the HTTP request's choices
  RequestEvent event;
};

class EventChannel {
 public:
  void push(size_t choice, const RequestEvent& event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back({choice, event});
    }
    ready_.notify_one();
  }

  // Everything queued so far, waiting up to `timeout` for the first event (empty on timeout).
  std::vector<ChoiceEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    std::vector<ChoiceEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ChoiceEvent> events_;
};

}  // namespace loom::server
