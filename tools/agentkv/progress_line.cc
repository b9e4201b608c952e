#include "tools/agentkv/progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

namespace agentkv::tools {

ProgressLine::Mode ProgressLine::ModeForStderr(bool enabled) {
  if (!enabled) return Mode::kOff;
  return isatty(STDERR_FILENO) == 1 ? Mode::kTerminal : Mode::kLines;
}

ProgressLine::ProgressLine(Mode mode)
    : ProgressLine(
          mode, [] { return std::chrono::steady_clock::now(); },
          [](std::string_view text) {
            std::fwrite(text.data(), 1, text.size(), stderr);
            std::fflush(stderr);
          }) {}

ProgressLine::ProgressLine(Mode mode, Clock clock, Sink sink)
    : mode_(mode),
      clock_(std::move(clock)),
      sink_(std::move(sink)),
      start_(clock_()),
      last_(start_) {}

ProgressLine::~ProgressLine() { Clear(); }

void ProgressLine::Update(size_t arm_index, size_t num_arms, std::string_view arm,
                          double fraction) {
  if (mode_ == Mode::kOff) return;
  const auto now = clock_();
  if (now - start_ < kQuietStart) return;
  const auto period = mode_ == Mode::kTerminal ? kTerminalPeriod : kLinePeriod;
  if (shown_ && now - last_ < period) return;
  last_ = now;
  shown_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string text = fmt::format("agentkv replay: arm {}/{} {:<20} {:5.1f}%  {:.0f} s",
                                       arm_index + 1, num_arms, arm, 100.0 * fraction, elapsed);
  if (mode_ == Mode::kTerminal) {
    sink_("\r\033[K" + text);
  } else {
    sink_(text + "\n");
  }
}

void ProgressLine::Clear() {
  if (mode_ != Mode::kTerminal || !shown_) return;
  sink_("\r\033[K");
  shown_ = false;
}

}  // namespace agentkv::tools
