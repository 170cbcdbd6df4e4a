// ProgressBar — where people wait (loading a model, quantizing, perplexity windows): a bar redrawn
// in place on stderr when it is a terminal; when it is not (logs, pipes, CI), a plain line at every
// quarter instead of carriage returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace loom::host {

class ProgressBar {
 public:
  // `unit` names what is counted ("MiB", "tensors", "windows"); values are divided by `scale`
  // before printing (bytes shown as MiB: scale 1 << 20).
  ProgressBar(std::string label, std::string unit, double scale = 1.0);
  // Redraws at most every 50 ms on a terminal; `detail` (e.g. the tensor's name) is shown after it.
  void update(uint64_t done, uint64_t total, const std::string& detail = "");
  // The final state and a newline (once; later updates are ignored).
  void finish();

  static bool stderr_is_terminal();

 private:
  void draw(uint64_t done, uint64_t total, const std::string& detail);

  std::string label_, unit_;
  double scale_;
  bool terminal_;
  bool finished_ = false;
  int last_quarter_ = -1;
  uint64_t last_done_ = 0, last_total_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

}  // namespace loom::host
