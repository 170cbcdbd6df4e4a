#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace loom {

size_t StopMatcher::indent_stop(size_t& undecided) const {
  undecided = 0;
  if (min_indent_ == 0) return std::string::npos;
  const auto next_line = [&](size_t from) {
    const size_t newline = held_.find('\n', from);
    return newline == std::string::npos ? std::string::npos : newline + 1;
  };
  // Every line start inside held_; the first line of the generation is never checked (the cursor's).
  for (size_t start = line_started_ ? 0 : next_line(0); start != std::string::npos;) {
    size_t text = start;
    while (text < held_.size() && (held_[text] == ' ' || held_[text] == '\t')) ++text;
    if (text == held_.size()) {
      undecided = held_.size() - start;
      return std::string::npos;
    }
    if (text - start < min_indent_) return start;
    start = next_line(text);
  }
  return std::string::npos;
}

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  if (stops_.empty() && min_indent_ == 0) return std::exchange(held_, "");

  size_t undecided = 0;
  size_t first_stop = indent_stop(undecided);
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
  size_t keep = undecided;
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
  if (!out.empty()) line_started_ = out.back() == '\n';
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return "";
  return std::exchange(held_, "");
}

}  // namespace loom
