#include "progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace loom::host {

ProgressBar::ProgressBar(std::string label, std::string unit, double scale)
    : label_(std::move(label)), unit_(std::move(unit)), scale_(scale), terminal_(stderr_is_terminal()),
      start_(std::chrono::steady_clock::now()) {}

bool ProgressBar::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void ProgressBar::update(uint64_t done, uint64_t total, const std::string& detail) {
  if (finished_) return;
  last_done_ = done;
  last_total_ = total;
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (done < total && now - last_draw_ < std::chrono::milliseconds(50)) return;
    last_draw_ = now;
    draw(done, total, detail);
    return;
  }
  const int quarter = total ? static_cast<int>(4 * done / total) : 4;
  if (quarter == last_quarter_) return;
  last_quarter_ = quarter;
  draw(done, total, detail);
}

void ProgressBar::finish() {
  if (finished_) return;
  if (terminal_ || last_quarter_ < 4) {
    last_quarter_ = 4;
    draw(last_total_ ? last_total_ : last_done_, last_total_ ? last_total_ : last_done_, "");
  }
  if (terminal_) std::fputc('\n', stderr);
  std::fflush(stderr);
  finished_ = true;
}

void ProgressBar::draw(uint64_t done, uint64_t total, const std::string& detail) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double percent = total ? 100.0 * double(done) / double(total) : 100.0;
  const std::string shown = detail.size() > 32 ? detail.substr(0, 29) + "..." : detail;
  if (terminal_) {
    constexpr int kWidth = 28;
    const int filled = static_cast<int>(kWidth * percent / 100.0);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %3.0f%% %.1f/%.1f %s %.1fs %-32s", label_.c_str(), bar.c_str(), percent,
                 double(done) / scale_, double(total) / scale_, unit_.c_str(), seconds, shown.c_str());
  } else {
    std::fprintf(stderr, "%s: %3.0f%% (%.1f/%.1f %s, %.1f s)\n", label_.c_str(), percent, double(done) / scale_,
                 double(total) / scale_, unit_.c_str(), seconds);
  }
  std::fflush(stderr);
}

}  // namespace loom::host
