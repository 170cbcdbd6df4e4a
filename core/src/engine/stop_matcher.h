// Stop strings over streamed text: text is released as soon as it cannot be the start of a stop
// string, and a stop string found in the stream ends generation with the text before it.
#pragma once

#include <string>
#include <vector>

namespace loom {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Add decoded text; returns the text that is safe to emit now. Sets stopped() once a stop string
  // appears (the returned text then ends just before it).
  std::string push(const std::string& text);
  // The held-back tail, at the end of generation (nothing once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace loom
