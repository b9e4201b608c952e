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

ProgressLine::ProgressLine(Mode mode, std::string command, std::string unit)
    : ProgressLine(
          mode, [] { return std::chrono::steady_clock::now(); },
          [](std::string_view text) {
            std::fwrite(text.data(), 1, text.size(), stderr);
            std::fflush(stderr);
          },
          std::move(command), std::move(unit)) {}

ProgressLine::ProgressLine(Mode mode, Clock clock, Sink sink, std::string command, std::string unit)
    : mode_(mode),
      command_(std::move(command)),
      unit_(std::move(unit)),
      clock_(std::move(clock)),
      sink_(std::move(sink)),
      start_(clock_()),
      last_(start_) {}

ProgressLine::~ProgressLine() { Clear(); }

void ProgressLine::Update(size_t arm_index, size_t num_arms, std::string_view arm,
                          double fraction) {
  if (mode_ == Mode::kOff) return;
  if (arms_.size() < num_arms) arms_.resize(num_arms);
  if (arm_index >= arms_.size()) return;
  ArmState& state = arms_[arm_index];
  const bool starts = !state.started;
  const bool finishes = !state.finished && fraction >= 1.0;
  state.name = std::string(arm);
  state.fraction = fraction;
  state.started = true;
  state.finished = state.finished || finishes;
  const auto now = clock_();
  if (now - start_ < kQuietStart) return;
  if (mode_ == Mode::kLines && (starts || finishes)) {
    // An arm reported only once, at its end, gets its "finished" line.
    Print(arm_index, finishes ? "finished" : "started", now);
    return;
  }
  const auto period = mode_ == Mode::kTerminal ? kTerminalPeriod : kLinePeriod;
  if (shown_ && now - last_ < period) return;
  size_t shown = arm_index;
  for (size_t i = 0; i < arms_.size(); ++i) {
    if (arms_[i].started && !arms_[i].finished) {
      shown = i;
      break;
    }
  }
  Print(shown, fmt::format("{:.1f}%", 100.0 * arms_[shown].fraction), now);
}

void ProgressLine::Print(size_t arm_index, std::string_view status,
                         std::chrono::steady_clock::time_point now) {
  last_ = now;
  shown_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string text =
      fmt::format("agentkv {}: {} {}/{} {:<20} {:>8}  {:.0f} s", command_, unit_, arm_index + 1,
                  arms_.size(), arms_[arm_index].name, status, elapsed);
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
