// Stop strings over streamed text: text is released as soon as it cannot be the start of a stop
// string, and a stop string found in the stream ends generation with the text before it.
// With a minimum indentation (llama.cpp's n_indent, which code editors send for completions at the
// cursor), a line after the first that starts with less indentation ends generation before it: the
// body being written is complete. A line's leading whitespace is held back until it is decided.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops, uint32_t min_indent = 0) : stops_(std::move(stops)), min_indent_(min_indent) {}

  // Add decoded text; returns the text that is safe to emit now. Sets stopped() once a stop string
  // appears (the returned text then ends just before it).
  std::string push(const std::string& text);
  // The held-back tail, at the end of generation (nothing once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  // Where a line that is not indented enough starts in held_ (npos: none), and how much of held_'s
  // tail is a line start still undecided.
  size_t indent_stop(size_t& undecided) const;

  std::vector<std::string> stops_;
  uint32_t min_indent_ = 0;
  std::string held_;
  bool stopped_ = false;
  bool line_started_ = false;  // held_ begins a line (what was released ends with a newline)
};

}  // namespace loom
