#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace loom {

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  if (stops_.empty()) return std::exchange(held_, "");

  size_t first_stop = std::string::npos;
  for (const auto& stop : stops_) {
    if (stop.empty()) continue;
    first_stop = std::min(first_stop, held_.find(stop));
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first_stop);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop string: it may complete later.
  size_t keep = 0;
  for (const auto& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return "";
  return std::exchange(held_, "");
}

}  // namespace loom
