// Progress of a long `agentkv replay` (or `agentkv capacity`) on stderr. Silent for the first 2 s
// of a run (short runs print nothing). Then, on a terminal, one line redrawn in place at most every
// 200 ms and erased when the run ends; anywhere else (a pipe, a log file, CI), plain
// newline-terminated lines without terminal control: one when an arm starts, one when it finishes,
// and between those at most one every 5 s, so a user who redirected stderr still sees the run
// advance. Disabled entirely by --quiet. Arms may run concurrently: the progress shown is that of
// the first arm, in arm order, that has started and not finished.
//
// The clock and the sink are parameters so that tests drive time and read what was printed.
// Not thread-safe (the replay reports progress on its own thread).
#ifndef AGENTKV_TOOLS_AGENTKV_PROGRESS_LINE_H_
#define AGENTKV_TOOLS_AGENTKV_PROGRESS_LINE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv::tools {

class ProgressLine {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Receives each piece of text to print, as is (a redraw starts with "\r\033[K").
  using Sink = std::function<void(std::string_view)>;

  enum class Mode { kOff, kTerminal, kLines };

  // How often each mode prints, and how long a run stays silent first.
  static constexpr std::chrono::milliseconds kQuietStart{2000};
  static constexpr std::chrono::milliseconds kTerminalPeriod{200};
  static constexpr std::chrono::milliseconds kLinePeriod{5000};

  // Off when `enabled` is false; else a terminal line when stderr is a terminal, plain lines
  // otherwise; printing to stderr with the steady clock.
  static Mode ModeForStderr(bool enabled);

  // Lines read "agentkv <command>: <unit> i/n <name> <status> <elapsed>" (`agentkv capacity`
  // shows its searches as units).
  explicit ProgressLine(Mode mode, std::string command = "replay", std::string unit = "arm");
  ProgressLine(Mode mode, Clock clock, Sink sink, std::string command = "replay",
               std::string unit = "arm");
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine();

  // Arm `arm_index` (0-based) of `num_arms`, named `arm`, is `fraction` in [0, 1] done: its
  // first report marks its start, a fraction of 1 its finish (as sim::ReplayProgress reports).
  void Update(size_t arm_index, size_t num_arms, std::string_view arm, double fraction);

  // Erases the terminal line, if shown. Plain lines stay.
  void Clear();

 private:
  Mode mode_;
  std::string command_;
  std::string unit_;
  Clock clock_;
  Sink sink_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  bool shown_ = false;

  struct ArmState {
    std::string name;
    double fraction = 0;
    bool started = false;
    bool finished = false;
  };
  std::vector<ArmState> arms_;

  // Prints arm `arm_index`'s line with `status` ("started", "finished", "50.0%").
  void Print(size_t arm_index, std::string_view status, std::chrono::steady_clock::time_point now);
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_PROGRESS_LINE_H_
